#!/usr/bin/env bash
# See _example.sh.
BROKEN=cdi-elsewhere exec "$(dirname "$0")/_example.sh" "$@"
