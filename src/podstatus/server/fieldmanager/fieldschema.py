"""List and map types of the served kinds, for server-side apply (generated: do not edit).

Made by tests/apiserver/gen_fieldschema.py from the OpenAPI v3 documents of k8s.io/kubernetes
v1.37.2: associative lists (keys, key defaults), sets, and atomic structs and maps
(an associative list whose items are atomic is in both). Lists not named here are atomic.
"""

from __future__ import annotations

from typing import Any

LISTS: dict[str, dict[tuple[str, ...], Any]] = {
    "Pod": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
        ("spec", "containers"): ("map", ("name",), {"name": ""}),
        ("spec", "containers", "env"): ("map", ("name",), {"name": ""}),
        ("spec", "containers", "ports"): (
            "map",
            ("containerPort", "protocol"),
            {"containerPort": 0, "protocol": "TCP"},
        ),
        ("spec", "containers", "resources", "claims"): ("map", ("name",), {"name": ""}),
        ("spec", "containers", "volumeDevices"): ("map", ("devicePath",), {"devicePath": ""}),
        ("spec", "containers", "volumeMounts"): ("map", ("mountPath",), {"mountPath": ""}),
        ("spec", "containers", "volumeMounts", "bindMountOptions"): "set",
        ("spec", "ephemeralContainers"): ("map", ("name",), {"name": ""}),
        ("spec", "ephemeralContainers", "env"): ("map", ("name",), {"name": ""}),
        ("spec", "ephemeralContainers", "ports"): (
            "map",
            ("containerPort", "protocol"),
            {"containerPort": 0, "protocol": "TCP"},
        ),
        ("spec", "ephemeralContainers", "resources", "claims"): ("map", ("name",), {"name": ""}),
        ("spec", "ephemeralContainers", "volumeDevices"): ("map", ("devicePath",), {"devicePath": ""}),
        ("spec", "ephemeralContainers", "volumeMounts"): ("map", ("mountPath",), {"mountPath": ""}),
        ("spec", "ephemeralContainers", "volumeMounts", "bindMountOptions"): "set",
        ("spec", "evictionResponders"): ("map", ("name",), {"name": ""}),
        ("spec", "hostAliases"): ("map", ("ip",), {"ip": ""}),
        ("spec", "imagePullSecrets"): ("map", ("name",), {"name": ""}),
        ("spec", "initContainers"): ("map", ("name",), {"name": ""}),
        ("spec", "initContainers", "env"): ("map", ("name",), {"name": ""}),
        ("spec", "initContainers", "ports"): (
            "map",
            ("containerPort", "protocol"),
            {"containerPort": 0, "protocol": "TCP"},
        ),
        ("spec", "initContainers", "resources", "claims"): ("map", ("name",), {"name": ""}),
        ("spec", "initContainers", "volumeDevices"): ("map", ("devicePath",), {"devicePath": ""}),
        ("spec", "initContainers", "volumeMounts"): ("map", ("mountPath",), {"mountPath": ""}),
        ("spec", "initContainers", "volumeMounts", "bindMountOptions"): "set",
        ("spec", "resourceClaims"): ("map", ("name",), {"name": ""}),
        ("spec", "resources", "claims"): ("map", ("name",), {"name": ""}),
        ("spec", "schedulingGates"): ("map", ("name",), {"name": ""}),
        ("spec", "topologySpreadConstraints"): (
            "map",
            ("topologyKey", "whenUnsatisfiable"),
            {"topologyKey": "", "whenUnsatisfiable": ""},
        ),
        ("spec", "volumes"): ("map", ("name",), {"name": ""}),
        ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "metadata", "finalizers"): "set",
        ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "metadata", "ownerReferences"): (
            "map",
            ("uid",),
            {"uid": ""},
        ),
        ("status", "conditions"): ("map", ("type",), {"type": ""}),
        ("status", "nodeAllocatableResourceClaimStatuses"): (
            "map",
            ("resourceClaimName",),
            {"resourceClaimName": ""},
        ),
        ("status", "nodeAllocatableResourceClaimStatuses", "containers"): "set",
        ("status", "nodeAllocatableResourceClaimStatuses", "mapping"): ("map", ("name",), {"name": ""}),
        ("status", "nodeAllocatableResourceClaimStatuses", "overhead"): ("map", ("name",), {"name": ""}),
        ("status", "podIPs"): ("map", ("ip",), {"ip": ""}),
        ("status", "resourceClaimStatuses"): ("map", ("name",), {"name": ""}),
        ("status", "resources", "claims"): ("map", ("name",), {"name": ""}),
        ("status", "volumeHealth"): ("map", ("name",), {"name": ""}),
        ("status", "volumeHealth", "healthConditions"): (
            "map",
            ("status", "reason"),
            {"status": "", "reason": ""},
        ),
    },
    "Node": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
        ("spec", "podCIDRs"): "set",
        ("spec", "podPreemptionPolicy", "disableResizePreemption"): "set",
        ("status", "addresses"): ("map", ("type",), {"type": ""}),
        ("status", "conditions"): ("map", ("type",), {"type": ""}),
    },
    "Namespace": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
        ("status", "conditions"): ("map", ("type",), {"type": ""}),
    },
    "Event": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
    },
    "coordination.k8s.io/Lease": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
    },
    "events.k8s.io/Event": {
        ("metadata", "finalizers"): "set",
        ("metadata", "ownerReferences"): ("map", ("uid",), {"uid": ""}),
    },
}

ATOMIC: dict[str, frozenset[tuple[str, ...]]] = {
    "Pod": frozenset(
        {
            ("metadata", "ownerReferences"),
            ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
            ("spec", "containers", "env", "valueFrom", "configMapKeyRef"),
            ("spec", "containers", "env", "valueFrom", "fieldRef"),
            ("spec", "containers", "env", "valueFrom", "fileKeyRef"),
            ("spec", "containers", "env", "valueFrom", "resourceFieldRef"),
            ("spec", "containers", "env", "valueFrom", "secretKeyRef"),
            ("spec", "ephemeralContainers", "env", "valueFrom", "configMapKeyRef"),
            ("spec", "ephemeralContainers", "env", "valueFrom", "fieldRef"),
            ("spec", "ephemeralContainers", "env", "valueFrom", "fileKeyRef"),
            ("spec", "ephemeralContainers", "env", "valueFrom", "resourceFieldRef"),
            ("spec", "ephemeralContainers", "env", "valueFrom", "secretKeyRef"),
            ("spec", "evictionResponders"),
            ("spec", "imagePullSecrets"),
            ("spec", "initContainers", "env", "valueFrom", "configMapKeyRef"),
            ("spec", "initContainers", "env", "valueFrom", "fieldRef"),
            ("spec", "initContainers", "env", "valueFrom", "fileKeyRef"),
            ("spec", "initContainers", "env", "valueFrom", "resourceFieldRef"),
            ("spec", "initContainers", "env", "valueFrom", "secretKeyRef"),
            ("spec", "nodeSelector"),
            ("spec", "topologySpreadConstraints", "labelSelector"),
            ("spec", "volumes", "cephfs", "secretRef"),
            ("spec", "volumes", "cinder", "secretRef"),
            ("spec", "volumes", "csi", "nodePublishSecretRef"),
            ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "metadata", "ownerReferences"),
            ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "spec", "dataSource"),
            ("spec", "volumes", "ephemeral", "volumeClaimTemplate", "spec", "selector"),
            ("spec", "volumes", "flexVolume", "secretRef"),
            ("spec", "volumes", "iscsi", "secretRef"),
            ("spec", "volumes", "rbd", "secretRef"),
            ("spec", "volumes", "scaleIO", "secretRef"),
            ("spec", "volumes", "storageos", "secretRef"),
        }
    ),
    "Node": frozenset(
        {
            ("metadata", "ownerReferences"),
        }
    ),
    "Namespace": frozenset(
        {
            ("metadata", "ownerReferences"),
        }
    ),
    "Event": frozenset(
        {
            ("involvedObject",),
            ("metadata", "ownerReferences"),
            ("related",),
        }
    ),
    "coordination.k8s.io/Lease": frozenset(
        {
            ("metadata", "ownerReferences"),
        }
    ),
    "events.k8s.io/Event": frozenset(
        {
            ("metadata", "ownerReferences"),
            ("regarding",),
            ("related",),
        }
    ),
}
