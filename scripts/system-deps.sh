#!/usr/bin/env bash
# Installs the system packages the test tiers need when they are missing: a JDK and Maven (the
# real Kafka broker), Debian's Prometheus (scrape and alert-rule tests), kcat (a real Kafka
# client), Chromium (HTML report rendering), docker-compose (to validate the compose file) and bubblewrap
# (the graded-code sandbox). Idempotent; needs root (as CI and the dev machines have).
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
# Headless Chromium renders the single-file HTML report in its test.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Validates docker-compose.yml offline (`docker-compose config`); no Docker engine needed.
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
# amtool validates deploy/alertmanager/alertmanager.yml.
command -v amtool >/dev/null 2>&1 || need+=(prometheus-alertmanager)
# bubblewrap sandboxes the code the function_output grader runs.
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]} (install them, or run as root)" >&2
    exit 2
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  # Debian's package may start a system Prometheus on :9090; the tests start their own.
  if command -v service >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
    service prometheus-alertmanager stop >/dev/null 2>&1 || true
  fi
fi
