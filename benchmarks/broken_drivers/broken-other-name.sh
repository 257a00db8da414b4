#!/usr/bin/env bash
# See _example.sh.
BROKEN=other-name exec "$(dirname "$0")/_example.sh" "$@"
