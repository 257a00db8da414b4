#!/usr/bin/env bash
# See _example.sh.
BROKEN=more-devices-after-restart exec "$(dirname "$0")/_example.sh" "$@"
