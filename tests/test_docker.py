"""The docker files, checked without a Docker engine: the compose file's structure, the image's
file set from .dockerignore, the healthchecks, and the trainer's exact command against a
scheduler and workers started with the compose file's exact commands."""

import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml
from docker.utils.build import exclude_paths

import pargraph
from tests.test_remote import COMPOSE, ROOT, Cluster, compose_commands

with open(COMPOSE) as _file:
    SERVICES = yaml.safe_load(_file)["services"]


def test_compose_file_structure():
    with open(COMPOSE) as file:
        compose = yaml.safe_load(file)
    assert "version" not in compose  # obsolete in the compose specification
    assert set(SERVICES) == {"scheduler", "worker", "trainer"}
    published = [p for s in SERVICES.values() for p in s.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published)
    assert "ports" not in SERVICES["worker"] and "ports" not in SERVICES["trainer"]
    for name in ("scheduler", "worker"):
        assert SERVICES[name]["healthcheck"]["test"][0] == "CMD"
    assert SERVICES["worker"]["depends_on"] == {"scheduler": {"condition": "service_healthy"}}
    assert SERVICES["trainer"]["depends_on"] == {
        "scheduler": {"condition": "service_healthy"},
        "worker": {"condition": "service_healthy"},
    }
    # The non-root trainer writes to a named volume (created from the image's /out, owned by
    # its user), not to a bind mount that Docker would create owned by root.
    volume, target = SERVICES["trainer"]["volumes"][0].split(":")
    assert target == "/out" and volume in compose["volumes"] and "/" not in volume
    assert "/out/" in SERVICES["trainer"]["command"]


def test_services_name_the_release_restart_and_are_bounded():
    for name, service in SERVICES.items():
        assert service["image"] == f"pargraph:{pargraph.version.release}", name  # not :latest
        limits = service["deploy"]["resources"]["limits"]
        assert float(limits["cpus"]) > 0 and re.fullmatch(r"\d+[kmg]", limits["memory"]), name
    assert SERVICES["scheduler"]["restart"] == SERVICES["worker"]["restart"] == "unless-stopped"
    assert SERVICES["trainer"]["restart"] == "no"  # a finished run is not trained again


def test_the_package_ships_its_type_hints():
    typed = os.path.join(os.path.dirname(pargraph.__file__), "py.typed")
    assert os.path.exists(typed)  # PEP 561: checkers read pargraph's annotations


def _dockerfile() -> str:
    with open(os.path.join(ROOT, "docker", "Dockerfile")) as file:
        return file.read()


def test_image_file_set_from_dockerignore():
    with open(os.path.join(ROOT, ".dockerignore")) as file:
        patterns = [line.strip() for line in file if line.strip() and line[0] != "#"]
    os.makedirs(os.path.join(ROOT, "demos", "out"), exist_ok=True)
    context = set(exclude_paths(ROOT, patterns, dockerfile="docker/Dockerfile"))
    assert not any(p == ".git" or p.startswith(".git/") for p in context)
    assert not any(p.startswith("demos/out") for p in context)
    assert not any("__pycache__" in p for p in context)
    for copied in re.findall(r"^COPY (.+) \S+$", _dockerfile(), re.MULTILINE):
        for source in copied.split():
            if not source.startswith("--"):
                assert source in context, f"the Dockerfile copies {source}, .dockerignore drops it"
    assert "pargraph/__init__.py" in context and "demos/digits.py" in context
    os.makedirs(os.path.join(ROOT, ".venv", "lib"), exist_ok=True)  # a local venv stays out
    try:
        context = set(exclude_paths(ROOT, patterns, dockerfile="docker/Dockerfile"))
        assert not any(p.startswith((".venv", "venv/")) for p in context)
    finally:
        os.rmdir(os.path.join(ROOT, ".venv", "lib"))
        if not os.listdir(os.path.join(ROOT, ".venv")):
            os.rmdir(os.path.join(ROOT, ".venv"))


def test_the_image_is_pinned_and_installs_its_dependencies_before_the_code():
    dockerfile = _dockerfile()
    base = re.search(r"^FROM (\S+)$", dockerfile, re.MULTILINE).group(1)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), base  # no floating tag
    lines = dockerfile.splitlines()
    dependencies = next(i for i, line in enumerate(lines) if "-r constraints.txt" in line)
    code = next(i for i, line in enumerate(lines)
                if line.startswith("COPY") and " pargraph " in line)
    assert dependencies < code and "--no-deps" in lines[code + 2]
    assert "chown pargraph /app /out" in dockerfile and lines[-1] == "USER pargraph"
    # Every service that runs the image can build it: compose never pulls a pargraph image.
    assert all(service["build"]["dockerfile"] == "docker/Dockerfile"
               for service in SERVICES.values())
    with open(os.path.join(ROOT, "docker", "constraints.txt")) as file:
        pinned = dict(line.split("==") for line in file.read().splitlines()
                      if "==" in line and not line.startswith("#"))
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        project = tomllib.load(file)["project"]
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + extras["dashboard"] + extras["demos"]
    for requirement in wanted:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-")
        assert name in pinned, f"docker/constraints.txt pins no version of {name}"


def _local(argv: list[str], cluster: Cluster, worker: int = 0) -> list[str]:
    text = shlex.join(argv).replace("127.0.0.1:8787", f"127.0.0.1:{cluster.dashboard}")
    text = text.replace("127.0.0.1:8789", f"127.0.0.1:{cluster.worker_http[worker]}")
    return shlex.split(text)


@pytest.fixture(scope="module")
def compose_cluster():
    running = Cluster(workers=2, pages=True)
    yield running
    running.close()


def test_healthchecks_pass_against_the_compose_commands(compose_cluster):
    """Each service's check passes, as Docker runs it: up to ``retries`` times (a loaded
    machine can let one check's own timeout run out)."""
    for name in ("scheduler", "worker"):
        health = SERVICES[name]["healthcheck"]
        check = health["test"][1:]
        assert check[0] == "python"
        for worker in range(len(compose_cluster.workers) if name == "worker" else 1):
            for _ in range(health["retries"]):
                done = subprocess.run([sys.executable,
                                       *_local(check, compose_cluster, worker)[1:]],
                                      capture_output=True, text=True, timeout=30)
                if done.returncode == 0:
                    break
            assert done.returncode == 0, (name, done.stderr)


def test_a_healthcheck_fails_when_nothing_answers():
    for name, port in (("scheduler", "8787"), ("worker", "8789")):
        check = shlex.join(SERVICES[name]["healthcheck"]["test"][2:])
        dead = check.replace(f"127.0.0.1:{port}", "127.0.0.1:1")
        done = subprocess.run([sys.executable, *shlex.split(dead)], capture_output=True,
                              timeout=30)
        assert done.returncode != 0, name


def test_the_trainer_command_runs_against_the_compose_cluster(compose_cluster, tmp_path):
    command = compose_commands()["trainer"]
    local = (command.replace("tcp://scheduler:8786", compose_cluster.address)
             .replace("/out/", f"{tmp_path}/"))
    # The command as the compose file has it, for 3 of its epochs (a later flag wins): they
    # show it trains there, and the suite's time budget has no room for all 20.
    done = subprocess.run(shlex.split(local.replace("python ", f"{sys.executable} ", 1))
                          + ["--epochs", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"on the dask cluster at {compose_cluster.address}" in done.stdout
    assert pargraph.load(tmp_path / "digits.npz")["epoch"] == 2
    assert (tmp_path / "digits.png").exists()
