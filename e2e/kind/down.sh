#!/usr/bin/env bash
# Delete the kind cluster e2e/kind/run.sh created.
set -euo pipefail
kind delete cluster --name "${CLUSTER:-gpuclaim-e2e}"
