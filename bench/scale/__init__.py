"""The scale benchmark: podstatus's virtual nodes against KWOK on the same kube-apiserver (docs/scale.md)."""
