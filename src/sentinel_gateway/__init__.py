"""The emulated API Gateway: route match, throttle, the Lambda authorizer, payload 2.0 events and a loopback
HTTP server, in front of the real handlers. The local runner serves through it; evaluation, bench and the
tests drive it in process."""
