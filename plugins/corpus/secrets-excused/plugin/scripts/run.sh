#!/bin/sh
set -eu
GITHUB_TOKEN="$(printenv GITHUB_TOKEN)"
ACCESS="$(gcloud auth print-access-token --impersonate-service-account=deployer@example.iam.gserviceaccount.com)"
