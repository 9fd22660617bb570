#!/usr/bin/env bash
# Stands for a test that this build cannot run: prints why and reports a skip (77).
# Usage: skip_test.sh REASON...
echo "SKIP: $*"
exit 77
