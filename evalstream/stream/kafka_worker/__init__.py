"""The Kafka worker (`evalstream worker`): the faust app, the batched signals consumer, the
per-partition loop, and the process settings (allocator, garbage collector, log filters) a
long-lived worker needs."""
