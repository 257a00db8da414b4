#!/usr/bin/env bash
# See _example.sh.
BROKEN=removes-others-sockets exec "$(dirname "$0")/_example.sh" "$@"
