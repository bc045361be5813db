# perflearn: set-up, native builds, demo, tests, benchmarks.
# Every target installs what it needs on a fresh machine (Debian, root or sudo).

PYTHON       ?= python3
SUDO         := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
APT_PACKAGES := fio iperf3 hyperfine memcached redis-server ethtool zstd procps iproute2 linux-perf
# Native parts: each directory has a Makefile with `deps`, `build`, `test` targets.
NATIVE_DIRS  := $(wildcard native/*/Makefile)
NATIVE_DIRS  := $(NATIVE_DIRS:/Makefile=)

.PHONY: setup deps python native demo test test-python test-native bench clean

setup: deps python native

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi
	@for d in $(NATIVE_DIRS); do $(MAKE) --no-print-directory -C $$d deps || exit 1; done

python:
	@$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'

native:
	@for d in $(NATIVE_DIRS); do $(MAKE) --no-print-directory -C $$d build || exit 1; done

# The fio sweep of examples/, measured here, stored in perflearn-demo.duckdb, its table;
# then the decision: a model's cross-validated error, its rules, the recommended settings
# for the most common access pattern (decide --context for another), and the gain of
# learned settings over the best single default in every pattern (Kunkel et al.'s table).
DEMO_STORE := perflearn-demo.duckdb
demo: setup
	@rm -f $(DEMO_STORE) $(DEMO_STORE).wal
	$(PYTHON) -m perflearn run examples/fio-sweep/spec.toml --store $(DEMO_STORE)
	$(PYTHON) -m perflearn decide -e fio-sweep -t iops --maximize --context-cols pattern --store $(DEMO_STORE)

test-native: setup
	@for d in $(NATIVE_DIRS); do $(MAKE) --no-print-directory -C $$d test || exit 1; done

# Tests marked `parallel` only compute, so they run on every core at once, one BLAS thread per
# worker (with a thread pool each, two workers took 40 % more CPU time than one); the rest
# start servers, capture, time or change cgroups, and run one at a time (in a parallel module,
# such a test is marked `live`). Both halves always run.
PYTEST   := $(PYTHON) -m pytest -q -p no:cacheprovider
ONE_BLAS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
test-python: setup
	@status=0; \
	echo "$(PYTEST) -m 'parallel and not live' -n auto"; $(ONE_BLAS) $(PYTEST) -m 'parallel and not live' -n auto || status=1; \
	echo "$(PYTEST) -m 'not parallel or live'"; $(PYTEST) -m 'not parallel or live' || status=1; \
	exit $$status

# Native tests first so that pytest's summary is the closing line.
test: test-native test-python

bench: setup
	$(PYTHON) bench/runner_overhead.py --runs 500 --repeats 5

clean:
	rm -rf build dist src/*.egg-info .pytest_cache
	@for d in $(NATIVE_DIRS); do $(MAKE) --no-print-directory -C $$d clean; done
