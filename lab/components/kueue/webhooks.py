#!/usr/bin/env python3
"""Rewrite Kueue's webhook configurations (config/components/webhook/manifests.yaml from the Kueue
module) for a controller that runs out of cluster, the way controller-runtime's envtest does it:

- every `clientConfig.service` becomes `url: https://127.0.0.1:<port><path>` with the lab CA as caBundle;
- the configurations get the names Kueue's kustomization gives them (`kueue-` prefix);
- the job-framework webhooks get the namespaceSelector of Kueue's kustomization (never kube-system or
  kueue-system), so a stopped Kueue cannot block the lab's own namespaces.

Usage: webhooks.py MANIFESTS CA_FILE PORT > rewritten.yaml
"""
from __future__ import annotations

import base64
import sys

import yaml

# Webhooks of Kueue's own kinds are cluster-wide; every other (job framework) webhook gets this selector.
KUEUE_KIND_PATHS = ("-kueue-x-k8s-io-",)
NAMESPACE_SELECTOR = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
    ]
}


def rewrite(docs: list[dict], ca_pem: bytes, port: int) -> list[dict]:
    ca_bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in docs:
        if not doc or doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"], "labels": {"lab.gpuaas.io/component": "kueue"}}
        for hook in doc.get("webhooks", []):
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": "https://127.0.0.1:%d%s" % (port, path), "caBundle": ca_bundle}
            if not any(p in path for p in KUEUE_KIND_PATHS):
                hook["namespaceSelector"] = NAMESPACE_SELECTOR
            hook.setdefault("timeoutSeconds", 10)
        out.append(doc)
    return out


def main() -> int:
    manifests, ca_file, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(manifests) as f:
        docs = list(yaml.safe_load_all(f))
    with open(ca_file, "rb") as f:
        ca_pem = f.read()
    out = rewrite(docs, ca_pem, port)
    if len(out) != 2:
        print("expected a mutating and a validating webhook configuration, found %d" % len(out), file=sys.stderr)
        return 1
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
