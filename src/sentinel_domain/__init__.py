"""Sentinel's domain core: pure rules over facts. Imports only the standard library, pydantic,
rfc8785 and defusedxml; time, ids and storage come in through the ports in `sentinel_domain.ports`."""

__version__ = "0.1.0"
