"""Running code written by agents: the bubblewrap sandbox graded code runs in, its per-run
process-count cgroup, the limited plain subprocess of an explicit opt-out, and the choice
between them."""
