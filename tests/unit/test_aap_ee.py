# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The execution environment definitions (execution-environment/: the AWX one and the AAP variant on
ee-minimal-rhel9): what `ansible-builder create` renders for each, what its introspection finds in this collection,
that they stay out of the collection artifact, and the helm installer."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import platform
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EE_DIR = ROOT / "execution-environment"


AWX_EE = "execution-environment.yml"
AAP_EE = "execution-environment-aap.yml"


def _builder_create(tmp_path: Path, definition: str = AWX_EE) -> Path:
    ctx = tmp_path / "context"
    proc = subprocess.run([str(BIN / "ansible-builder"), "create", "-f", str(EE_DIR / definition),
                           "-c", str(ctx), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ctx


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    return _builder_create(tmp_path_factory.mktemp("ee"))


@pytest.fixture(scope="module")
def aap_context(tmp_path_factory) -> Path:
    return _builder_create(tmp_path_factory.mktemp("ee-aap"), AAP_EE)


def _stage(text: str, name: str) -> str:
    start = text.index("FROM %s AS %s" % ("$EE_BASE_IMAGE" if name == "base" else "base", name))
    nxt = text.find("\nFROM ", start + 1)
    return text[start:nxt if nxt > 0 else len(text)]


def test_aap_variant_keeps_the_platforms_ansible_core(aap_context: Path):
    """ee-minimal-rhel9 ships AAP's supported ansible-core and ansible-runner: nothing may pip-install its own over
    them, the package manager is microdnf (the image has no dnf), and the build checks the base image's ansible."""
    text = (aap_context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="registry.redhat.io/ansible-automation-platform-' in text
    assert "/ee-minimal-rhel9:" in text.split("\n", 1)[0]
    assert 'ARG PKGMGR="/usr/bin/microdnf"' in text and "/usr/bin/dnf" not in text
    assert "ANSIBLE_INSTALL_REFS" not in text
    pip_lines = [line for line in text.splitlines() if "pip install" in line]
    assert pip_lines and not [line for line in pip_lines if "ansible" in line], pip_lines
    # no distribution Python installed beside the image's own (PYPKG), and the image's ansible is checked
    assert "PYPKG" not in text
    assert "check_ansible $PYCMD" in _stage(text, "final")


def test_awx_variant_installs_its_own_ansible_core(context: Path):
    """The AWX definition is the one that pins ansible-core (CentOS Stream has none): the difference is deliberate."""
    text = (context / "Containerfile").read_text()
    assert 'ARG PKGMGR="/usr/bin/dnf"' in text and "ansible-core>=2.16" in text and "centos" in text


def test_both_variants_ship_the_same_collections_helm_and_checks():
    awx = yaml.safe_load((EE_DIR / AWX_EE).read_text())
    aap = yaml.safe_load((EE_DIR / AAP_EE).read_text())
    for key in ("version", "build_arg_defaults", "additional_build_files", "additional_build_steps"):
        assert aap[key] == awx[key], key
    assert aap["dependencies"]["galaxy"] == awx["dependencies"]["galaxy"]
    assert not {"ansible_core", "ansible_runner", "python_interpreter"} & set(aap["dependencies"])
    assert aap["options"]["package_manager_path"] == "/usr/bin/microdnf"
    assert "ee-minimal-rhel9" in aap["images"]["base_image"]["name"]


def test_definition_is_ansible_builder_v3():
    ee = yaml.safe_load((EE_DIR / "execution-environment.yml").read_text())
    assert ee["version"] == 3
    galaxy = yaml.safe_load((EE_DIR / ee["dependencies"]["galaxy"]).read_text())
    names = [c["name"] for c in galaxy["collections"]]
    assert "kubernetes.core" in names
    assert any(c.get("type") == "file" and "gpuaas-platform" in c["name"] for c in galaxy["collections"])


@pytest.mark.parametrize("variant", ["awx", "aap"])
def test_containerfile_installs_collections_helm_and_checks_them(context: Path, aap_context: Path, variant: str):
    context = context if variant == "awx" else aap_context
    text = (context / "Containerfile").read_text()
    final = text[text.index("FROM base AS final"):]
    assert "ansible-galaxy collection install" in text and "-r requirements.yml" in text
    # introspection of the installed collections feeds the final image's pip and bindep installs
    assert "introspect.py introspect" in text and "install-from-bindep" in final
    assert "install_helm.py" in final and "helm version" in final
    # the build fails when the collection or kubernetes.core.helm is not loadable
    assert "ansible-doc -t module gpuaas.platform.tenants" in final
    assert "kubernetes.core.helm" in final
    assert (context / "_build" / "helm" / "install_helm.py").is_file()
    assert (context / "_build" / "requirements.yml").is_file()


def test_introspection_of_this_collection(context: Path, tmp_path: Path):
    """What ansible-builder's own introspection script finds in gpuaas.platform (meta/execution-environment.yml)."""
    base = tmp_path / "collections"
    link = base / "ansible_collections" / "gpuaas" / "platform"
    link.parent.mkdir(parents=True)
    link.symlink_to(ROOT)
    out_bindep, out_pip = tmp_path / "bindep.txt", tmp_path / "requirements.txt"
    proc = subprocess.run([sys.executable, str(context / "_build" / "scripts" / "introspect.py"), "introspect",
                           "--write-bindep=%s" % out_bindep, "--write-pip=%s" % out_pip, str(base)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    system = [line.split()[0] for line in out_bindep.read_text().splitlines() if line.strip()]
    python = [line.split()[0] for line in out_pip.read_text().splitlines() if line.strip()]
    assert "ca-certificates" in system
    assert not [p for p in system if p.startswith("python")], "the EE's bindep must not pull a distro Python: %s" % system
    wanted = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    wanted = [w for w in wanted if w]
    for req in wanted:
        name = req.split(">")[0].split("=")[0].split("<")[0].strip().lower()
        if name == "pyyaml":  # ansible-builder drops what ansible-core itself brings
            continue
        assert any(p.lower().startswith(name) for p in python), (req, python)


def test_collection_bindep_has_no_distro_python():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    bindep = ROOT / meta["dependencies"]["system"]
    pkgs = [line.split()[0] for line in bindep.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert pkgs and not [p for p in pkgs if p.startswith("python")]
    assert (ROOT / meta["dependencies"]["python"]).is_file()


def test_ee_definition_stays_out_of_the_collection_artifact(tmp_path: Path):
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert "execution-environment" in galaxy["build_ignore"]
    src = tmp_path / "src"
    # build from a copy without the heavy, git-ignored directories (what a clean checkout has)
    subprocess.run(["rsync", "-a", "--exclude", "/.git", "--exclude", "/.venv", "--exclude", "/.lab*", "--exclude", "/.build",
                    "--exclude", "/.ansible", "--exclude", "__pycache__", "%s/" % ROOT, str(src)], check=True)
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), str(src)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    artifact = next(tmp_path.glob("gpuaas-platform-*.tar.gz"))
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    assert "meta/ee-bindep.txt" in names and "meta/execution-environment.yml" in names
    assert "roles/aap_config/tasks/main.yml" in names
    assert not [n for n in names if n.startswith("execution-environment")]
    assert (EE_DIR / AAP_EE).is_file() and (EE_DIR / AWX_EE).is_file()


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict = {}

    def do_GET(self):  # noqa: N802 - http.server API
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        if body is not None:
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("pin", ["published", "good-pin", "bad-pin"])
def test_install_helm_checks_the_sha256(tmp_path: Path, pin: str):
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    payload = b"#!/bin/sh\necho v3.99.0\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("linux-%s/helm" % arch)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    archive = buf.getvalue()
    digest = hashlib.sha256(archive).hexdigest()
    name = "/helm-v3.99.0-linux-%s.tar.gz" % arch
    _Files.files = {name: archive, name + ".sha256sum": ("%s  helm.tgz\n" % digest).encode()}
    server = http.server.HTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = dict(os.environ, HELM_VERSION="v3.99.0", HELM_BASE_URL="http://127.0.0.1:%d" % server.server_port,
                   HELM_INSTALL_DIR=str(tmp_path))
        if pin == "good-pin":
            env["HELM_SHA256"] = digest
        elif pin == "bad-pin":
            env["HELM_SHA256"] = "0" * 64
        proc = subprocess.run([sys.executable, str(EE_DIR / "helm" / "install_helm.py")], capture_output=True, text=True,
                              env=env, check=False)
    finally:
        server.shutdown()
    if pin == "bad-pin":
        assert proc.returncode == 1 and "expected " + "0" * 64 in proc.stderr
        assert not (tmp_path / "helm").exists()
    else:
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "helm").read_bytes() == payload
        assert os.access(tmp_path / "helm", os.X_OK)
