"""Kafka: topic creation and checks, reading slices and producing, partitions, compacted topics,
batched output, episode lookup."""
