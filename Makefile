# Entry points. `make demo` and `make test` each do the whole set-up on a fresh Debian 12 machine:
# install missing packages (scripts/setup.sh), configure and build with a CMake preset, then run.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PRESET ?= release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD_DIR := build/$(if $(filter asan-ubsan,$(PRESET)),asan,$(PRESET))

.PHONY: help setup configure build demo test asan tsan soak mutate format format-check clean

help:
	@echo "make demo          set up, build (preset $(PRESET)) and run examples/demo.cpp"
	@echo "make test          set up, build and run every CTest suite (unit, property, install, ...)"
	@echo "make asan          the same under AddressSanitizer + UBSan (preset asan-ubsan, build/asan, 0.1x cases)"
	@echo "make tsan          the thread-safety tests (names with Concurrency) under ThreadSanitizer (preset tsan, build/tsan)"
	@echo "make soak          the random-graph properties at TG_SOAK_SCALE (45: ~100,000 Vulkan graphs)"
	@echo "make mutate        seeded bugs applied one at a time to a worktree of HEAD (scripts/mutate.py): which survive"
	@echo "make build         set up and build only;  PRESET=dev|release|asan-ubsan|tsan picks the preset"
	@echo "make format        clang-format every tracked C++ file;  make format-check only checks"
	@echo "make clean         remove build/dev, build/release, build/asan and build/tsan"

setup:
	@scripts/setup.sh

configure: setup
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET) -j $(JOBS)

demo: configure
	cmake --build --preset $(PRESET) -j $(JOBS) --target tg_demo
	./$(BUILD_DIR)/tg_demo

test: build
	ctest --preset $(PRESET) -j $(JOBS)

# Every suite under ASan + UBSan + LSan at -O1, with the long suites at a tenth of their cases
# (TG_TEST_SCALE=0.1) and lavapipe's own leaks suppressed (tests/sanitizers/lsan.supp).
asan:
	$(MAKE) test PRESET=asan-ubsan

# The library and tg_unit_tests under TSan (the build preset builds only those), then the tests
# whose names contain Concurrency (the test preset's filter): Session, Training and Forward from several threads.
tsan:
	$(MAKE) test PRESET=tsan

# Random-graph properties only, TG_SOAK_SCALE times their CI counts (scripts/soak.sh).
soak: configure
	cmake --build --preset $(PRESET) -j $(JOBS) --target tg_vk_tests tg_property_tests
	scripts/soak.sh $(BUILD_DIR)

# The mutation check: every mutant of scripts/mutants.py in build/mutate (a worktree of HEAD with its
# own build), report in build/mutate/report.md. MUTANTS="a b" runs only those.
mutate: setup
	python3 scripts/mutate.py $(if $(MUTANTS),--only $(MUTANTS),)

CXX_FILES = git ls-files --cached --others --exclude-standard '*.cpp' '*.h' '*.hpp' '*.cc'

format:
	$(CXX_FILES) | xargs -r clang-format -i

format-check:
	$(CXX_FILES) | xargs -r clang-format --dry-run --Werror

clean:
	rm -rf build/dev build/release build/asan build/tsan
