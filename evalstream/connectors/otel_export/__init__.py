"""Evaluations out to OpenTelemetry backends: verdict and score records as
`gen_ai.evaluation.result` events, their OTLP protobuf bodies and the batching, retrying
exporter."""
