#!/usr/bin/env bash
# See _example.sh.
BROKEN=fails-on-restart exec "$(dirname "$0")/_example.sh" "$@"
