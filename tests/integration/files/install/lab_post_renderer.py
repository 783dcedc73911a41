# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helm post-renderer for the SHARED gpuaas lab only (gpuaas_helm_post_renderer in the lab inventory).

The lab already serves the upstream CRDs and runs the real Kueue and KEDA controllers out-of-cluster with
their own webhook configurations and APIServices. A chart installed on the lab runs its pods on KWOK fake
nodes (nothing really runs), so its cluster-wide hooks would point at Services without endpoints and fail
closed for everyone. This drops, from the rendered chart, exactly the kinds that act cluster-wide:
CustomResourceDefinition, MutatingWebhookConfiguration, ValidatingWebhookConfiguration, APIService; and it
removes the ``rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}`` labels from ClusterRoles, so a chart
installed by a test never widens the built-in admin/edit/view roles other tests' tenants are bound to.
Everything else of the upstream chart (Deployments, Services, RBAC, ConfigMaps, ClusterPolicy...) is kept.
"""

import sys

import yaml

DROP = {"CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"}


def main() -> int:
    kept = []
    for doc in yaml.safe_load_all(sys.stdin):
        if not isinstance(doc, dict) or doc.get("kind") in DROP:
            continue
        labels = (doc.get("metadata") or {}).get("labels") or {}
        for key in [k for k in labels if k.startswith("rbac.authorization.k8s.io/aggregate-to-")]:
            del labels[key]
        kept.append(doc)
    yaml.safe_dump_all(kept, sys.stdout, default_flow_style=False, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
