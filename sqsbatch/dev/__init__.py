"""The `local` extra: a local SQS endpoint (moto's server) and its speed-up, for tests, the demo
and `sqsbatch dev`."""
