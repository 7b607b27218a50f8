"""Generated from kubelet_kit/cri/api.proto and kubelet_kit/cri/api_v1alpha2.proto by scripts/gen_protos.py; do not edit."""
