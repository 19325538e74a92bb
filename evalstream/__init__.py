"""evalstream: continuous evaluation of AI agents from the signals they emit.

Three packages with one-way imports, `stream -> connectors -> assertions`:
`evalstream.assertions` is the pure core (signals, episodes, assertion types, suites,
scoring), `evalstream.connectors` the edges to the outside world (files, Kafka, HTTP,
model providers) and `evalstream.stream` the processes and the command line
(`evalstream.stream.cli`). This module imports none of them.
"""
