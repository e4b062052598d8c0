"""One construct per concern; `sentinel_infra.stack` wires them together."""
