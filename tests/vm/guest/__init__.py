"""Programs the VM tests run inside a VM, each as a script of the checkout."""
