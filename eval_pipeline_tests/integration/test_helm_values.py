"""deploy/kubernetes/values.yaml: valid for the Dagster Helm chart and the same deployment as dagster.yaml beside it."""

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
CHART_VERSION = "1.13.27"
# Files of public repositories are not committed here, and nothing is downloaded at test time: the chart (its
# values.yaml and values.schema.json) is read from where the user pulled it.
CHART_ENV = "EVAL_PIPELINE_DAGSTER_CHART"
# The chart defaults the launcher mapping reads (global.dagsterHome, global.postgresqlSecretName of the chart's
# values.yaml); checked against the chart's own values.yaml when it is there.
CHART_DEFAULTS = {
    "global": {"dagsterHome": "/opt/dagster/dagster_home", "postgresqlSecretName": "dagster-postgresql-secret"},
    "serviceAccount": {"name": ""},
    "concurrency": {"enabled": False},
}
# The release name and namespace deploy/kubernetes/README.md installs with: the chart names the instance ConfigMap
# "<release>-instance" and runs jobs where the release is unless told otherwise.
RELEASE = "dagster"
NAMESPACE = "evals"
# The Kubernetes definitions the chart's schema points into; fetched by Helm at install time, never here.
KUBERNETES_DEFINITIONS = (
    "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/v1.19.0/_definitions.json"
)

pytestmark = pytest.mark.integration


def load_yaml(path: Path):
    """One YAML document from a file."""
    return yaml.safe_load(path.read_text())


def helm_merge(defaults: dict, values: dict) -> dict:
    """Chart defaults under user values as Helm coalesces them.

    Maps merge, user wins, lists replace, a user null deletes.
    """
    merged = copy.deepcopy(values)
    for key, default in defaults.items():
        if key not in merged:
            merged[key] = copy.deepcopy(default)
        elif merged[key] is None:
            del merged[key]
        elif isinstance(merged[key], dict) and isinstance(default, dict):
            merged[key] = helm_merge(default, merged[key])
    return merged


@pytest.fixture(scope="module")
def chart() -> Path:
    """The Dagster chart folder named by EVAL_PIPELINE_DAGSTER_CHART; skipped, naming it, when it is not there."""
    folder = os.environ.get(CHART_ENV)
    if (
        not folder
        or not (Path(folder) / "values.schema.json").is_file()
        or not (Path(folder) / "values.yaml").is_file()
    ):
        pytest.skip(
            f"the Dagster Helm chart is not available: set {CHART_ENV} to the folder of "
            f"`helm pull dagster/dagster --version {CHART_VERSION} --untar` (values.yaml, values.schema.json); "
            "files of public repositories are not committed to this project"
        )
    return Path(folder)


def merged_values(chart: Path | None = None) -> dict:
    """deploy/kubernetes/values.yaml over the chart's defaults (the few the launcher reads, without the chart)."""
    defaults = load_yaml(chart / "values.yaml") if chart else CHART_DEFAULTS
    return helm_merge(defaults, load_yaml(KUBERNETES / "values.yaml"))


def remote_refs(node, found: set[str]) -> set[str]:
    """Every $ref of the schema that leaves the document, as written."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            found.add(ref)
        for value in node.values():
            remote_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            remote_refs(value, found)
    return found


def permissive_kubernetes_definitions(schema: dict) -> dict:
    """A stand-in for the Kubernetes definitions.

    Every pointer the chart's schema uses resolves to {} (accept anything).
    """
    document: dict = {}
    for ref in remote_refs(schema, set()):
        uri, _, pointer = ref.partition("#")
        assert uri == KUBERNETES_DEFINITIONS, (
            f"the chart schema points at {uri}, not the definitions this test stands in for"
        )
        node = document
        for segment in pointer.strip("/").split("/"):
            node = node.setdefault(segment, {})
    return document


def chart_validator(chart: Path, kubernetes_definitions: dict | None = None) -> jsonschema.protocols.Validator:
    """A validator for the chart's schema, its Kubernetes refs served from memory instead of the network."""
    schema = json.loads((chart / "values.schema.json").read_text())
    definitions = (
        kubernetes_definitions if kubernetes_definitions is not None else permissive_kubernetes_definitions(schema)
    )

    def retrieve(uri: str) -> Resource:
        if uri != KUBERNETES_DEFINITIONS:
            raise LookupError(f"{uri} is not available offline")
        return Resource.from_contents(definitions, default_specification=DRAFT202012)

    # The schema declares no $schema; it is pydantic's output, written for Draft 2020-12, under which keywords
    # beside a $ref (such as "type": "object") apply as well.
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator_class.check_schema(schema)
    return validator_class(schema, registry=Registry(retrieve=retrieve))


def schema_errors(values: dict, validator) -> list[str]:
    """Where and why the values break the chart schema; empty when they validate."""
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(values)]


def launcher_config_from_values(values: dict) -> dict:
    """The K8sRunLauncher config the chart's run-launcher template writes from these values.

    Its field mapping, not a render.
    """
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    run_k8s_config = launcher.get("runK8sConfig") or {}
    config = {
        "load_incluster_config": launcher["loadInclusterConfig"],
        "job_namespace": launcher.get("jobNamespace") or NAMESPACE,
        "image_pull_policy": launcher["imagePullPolicy"],
        "service_account_name": values["global"].get("serviceAccountName")
        or values["serviceAccount"].get("name")
        or RELEASE,
        "dagster_home": values["global"]["dagsterHome"],
        "instance_config_map": f"{RELEASE}-instance",
        "postgres_password_secret": values["global"]["postgresqlSecretName"],
        "env_config_maps": [source["name"] for source in launcher["envConfigMaps"] if "name" in source],
        "env_secrets": [source["name"] for source in launcher["envSecrets"] if "name" in source],
        "run_k8s_config": {
            snake: run_k8s_config[camel]
            for camel, snake in [
                ("containerConfig", "container_config"),
                ("podSpecConfig", "pod_spec_config"),
                ("podTemplateSpecMetadata", "pod_template_spec_metadata"),
                ("jobSpecConfig", "job_spec_config"),
                ("jobMetadata", "job_metadata"),
            ]
            if run_k8s_config.get(camel)
        },
    }
    return {key: value for key, value in config.items() if value not in ([], {})}


def test_the_chart_files_belong_together_and_hold_the_defaults_assumed_here(chart):
    """The chart's own defaults pass its schema, and include the defaults the launcher mapping assumes without it."""
    defaults = load_yaml(chart / "values.yaml")
    assert schema_errors(defaults, chart_validator(chart)) == []
    for section, assumed in CHART_DEFAULTS.items():
        for key, value in assumed.items():
            assert defaults[section][key] == value, (section, key)


def test_merged_values_validate_against_chart_schema(chart):
    """Chart defaults plus deploy/kubernetes/values.yaml pass the chart schema, as Helm checks before rendering."""
    values = merged_values(chart)
    assert schema_errors(values, chart_validator(chart)) == []
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["postgresql"]["enabled"] is False
    assert values["telemetry"]["enabled"] is False
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["--python-file", "deploy/kubernetes/definitions.py"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("runLauncher", "type"), "K8SRunLauncher"),
        (("dagsterDaemon", "runCoordinator", "config", "queuedRunCoordinator", "maxConcurrentRuns"), "8"),
        (("runLauncher", "config", "k8sRunLauncher", "jobNamespaces"), "evals"),
        (("postgresql", "enabled"), "false"),
        (("dagster-user-deployments", "deployments", 0, "port"), "3030"),
    ],
    ids=["launcher-type-misspelled", "max-runs-a-string", "unknown-launcher-key", "enabled-a-string", "port-a-string"],
)
def test_broken_values_fail_the_schema(chart, path, value):
    """A misspelled or mistyped value in the merged values is reported by the schema, so the check above can fail."""
    values = merged_values(chart)
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert schema_errors(values, chart_validator(chart)) != []


def test_merged_values_validate_with_kubernetes_definitions(chart):
    """With real Kubernetes definitions behind the chart's refs, env sources, resources and probes are checked too."""
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate",
        reason="kubernetes-validate is not installed (pip install kubernetes-validate): it ships Kubernetes JSON "
        "schemas, used here in place of the chart's online v1.19.0 definitions",
    )
    from importlib.resources import files

    root = files(kubernetes_validate) / "kubernetes-json-schema"
    # The oldest release it ships is the closest to the v1.19.0 definitions the chart names.
    versions = sorted(
        (entry.name for entry in root.iterdir() if entry.name.startswith("v") and entry.name.endswith("-local")),
        key=lambda name: tuple(int(part) for part in name[1:].removesuffix("-local").split(".")),
    )
    assert versions, f"no Kubernetes schemas under {root}"
    shipped = json.loads((root / versions[0] / "_definitions.json").read_text())
    # The chart points at #/definitions/…; these files keep the same objects under $defs.
    definitions = {"definitions": shipped["$defs"], "$defs": shipped["$defs"]}
    validator = chart_validator(chart, definitions)
    assert schema_errors(merged_values(chart), validator) == []
    broken = merged_values(chart)
    broken["runLauncher"]["config"]["k8sRunLauncher"]["envConfigMaps"] = [{"name": 7}]
    assert schema_errors(broken, validator) != []


def test_run_launcher_agrees_with_dagster_yaml():
    """The launcher, run queue and storage the values describe are the ones deploy/kubernetes/dagster.yaml states."""
    k8s = pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed (pip install 'dagster-k8s')")
    from dagster._config import process_config

    values = merged_values()
    instance = load_yaml(KUBERNETES / "dagster.yaml")
    from_values = launcher_config_from_values(values)
    stated = instance["run_launcher"]["config"]
    assert instance["run_launcher"]["class"] == values["runLauncher"]["type"]
    for key in (
        "job_namespace",
        "env_config_maps",
        "env_secrets",
        "service_account_name",
        "image_pull_policy",
        "load_incluster_config",
        "dagster_home",
        "instance_config_map",
        "postgres_password_secret",
        "run_k8s_config",
    ):
        assert from_values.get(key) == stated.get(key), key
    queue = values["dagsterDaemon"]["runCoordinator"]
    assert queue["enabled"] and queue["type"] == "QueuedRunCoordinator"
    assert (
        queue["config"]["queuedRunCoordinator"]["maxConcurrentRuns"]
        == instance["concurrency"]["runs"]["max_concurrent_runs"]
    )
    # The chart's own concurrency block would put a second run limit into the instance, which Dagster rejects.
    assert not values["concurrency"]["enabled"]
    assert values["postgresql"]["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    assert values["telemetry"]["enabled"] == instance["telemetry"]["enabled"]
    result = process_config(k8s.K8sRunLauncher.config_type(), from_values)
    assert result.success, result.errors


def test_helm_renders_the_same_instance(chart, tmp_path):
    """helm lint and helm template on the real chart.

    The instance ConfigMap it renders carries dagster.yaml's launcher.
    """
    helm = shutil.which("helm")
    if helm is None:
        pytest.skip("helm is not installed; the schema and launcher checks above stand in for helm lint/template")
    values_file = str(KUBERNETES / "values.yaml")
    lint = subprocess.run([helm, "lint", str(chart), "-f", values_file], capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = subprocess.run(
        [helm, "template", RELEASE, str(chart), "--namespace", NAMESPACE, "-f", values_file],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    config_maps = {
        document["metadata"]["name"]: document
        for document in yaml.safe_load_all(rendered.stdout)
        if document and document.get("kind") == "ConfigMap"
    }
    instance = yaml.safe_load(config_maps[f"{RELEASE}-instance"]["data"]["dagster.yaml"])
    stated = load_yaml(KUBERNETES / "dagster.yaml")
    launcher, stated_launcher = instance["run_launcher"]["config"], stated["run_launcher"]["config"]
    assert instance["run_launcher"]["class"] == "K8sRunLauncher"
    for key in ("job_namespace", "service_account_name", "instance_config_map", "run_k8s_config"):
        assert launcher.get(key) == stated_launcher[key], key
    # The chart may add its own ConfigMaps and Secrets to the lists; ours must be among them.
    for key in ("env_config_maps", "env_secrets"):
        assert set(stated_launcher[key]) <= set(launcher.get(key) or []), key
    assert (
        instance["run_coordinator"]["config"]["max_concurrent_runs"]
        == stated["concurrency"]["runs"]["max_concurrent_runs"]
    )
    schemes = {found["scheme"] for found in postgres_connections(instance)}
    assert schemes == {stated["storage"]["postgres"]["postgres_db"]["scheme"]}


def postgres_connections(node) -> list[dict]:
    """Every postgres_db mapping in an instance config, wherever the chart puts its storages."""
    if isinstance(node, dict):
        own = [node["postgres_db"]] if isinstance(node.get("postgres_db"), dict) else []
        return own + [found for value in node.values() for found in postgres_connections(value)]
    if isinstance(node, list):
        return [found for value in node for found in postgres_connections(value)]
    return []
