"""Generated from kubelet_kit/cri/api.proto by scripts/gen_protos.py; do not edit."""
