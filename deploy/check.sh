#!/usr/bin/env bash
# Checks the deployment files without Docker or a cluster: the Compose specification's JSON
# schema (check-jsonschema, PyPI), the Kubernetes API schemas (kubernetes-validate, PyPI) and
# HAProxy's own parser (haproxy -c, Debian). Installs the Python tools into .deploy-check/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .deploy-check/bin/check-jsonschema ]; then
  python3 -m venv .deploy-check
  .deploy-check/bin/pip install -q check-jsonschema kubernetes-validate
fi
.deploy-check/bin/check-jsonschema --builtin-schema vendor.compose-spec deploy/compose.yaml
.deploy-check/bin/kubernetes-validate --strict deploy/k8s/*.yaml
# The service names resolve only inside compose's network: their warnings are expected here.
haproxy -c -f deploy/haproxy.cfg 2>&1 | grep -v "could not resolve address"
