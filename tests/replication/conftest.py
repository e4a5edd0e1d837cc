"""Fixtures for the tests of shipping to NATS JetStream and replicas (the NATS fixtures come from
tests.support.nats)."""
