#!/usr/bin/env bash
# Helm post-renderer for the SHARED gpuaas lab only: see lab_post_renderer.py next to this file.
exec "${GPUAAS_LAB_PYTHON:-python3}" "$(dirname "$(readlink -f "$0")")/lab_post_renderer.py"
