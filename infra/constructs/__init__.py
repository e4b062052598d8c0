"""One construct per concern; `infra.stack` wires them together."""
