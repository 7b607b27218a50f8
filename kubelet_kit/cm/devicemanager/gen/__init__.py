"""Generated from kubelet_kit/cm/devicemanager/api.proto by scripts/gen_protos.py; do not edit."""
