# The entry points a user needs: `make demo` and `make test`. Each installs
# the Debian packages it needs, configures and builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

export LLVM_EXTERNAL_LIT := /usr/lib/llvm-22/bin/lit

.PHONY: all deps configure build test check-runtime-only check-gpu-script check-torch2 demo docs format clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_EXTERNAL_LIT) $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@bash scripts/check-runtime-only.sh $(BUILD) $(BUILD)-runtime-only
	@$(MAKE) --no-print-directory check-gpu-script
	@$(MAKE) --no-print-directory check-torch2

# runtime/gpu-check.sh, the check a GPU host runs, run here on the CPU: its
# bundle made by this build, its runtime-only build against this libtorch.
check-gpu-script: build
	@bash scripts/gpu-bundle.sh $(BUILD) $(BUILD)-gpu-bundle
	@OUT=$(BUILD)-gpu-check bash runtime/gpu-check.sh --device cpu \
	  --bundle $(BUILD)-gpu-bundle --build $(BUILD)-gpu-cpu

# The runtime against PyTorch 2.x (a GPU host has 2.x, this machine 1.13),
# in Debian roots made once under $(BUILD)-torch2: the runtime-only build
# and the same checks against unstable's newest PyTorch, pippy-run linked
# against Debian 13's CUDA libtorch 2.6, and each one's saved modules.
check-torch2: build
	@bash scripts/torch2-check.sh $(BUILD) $(BUILD)-torch2

# A second build with -DPIPPY_RUNTIME_ONLY=ON: no LLVM or MLIR in any of
# its commands, and it trains executables the full build lowered.
check-runtime-only: build
	@bash scripts/check-runtime-only.sh $(BUILD) $(BUILD)-runtime-only

demo: build
	@bash scripts/demo.sh $(BUILD)

docs: deps configure
	cmake --build $(BUILD) --target pippy-docs

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-runtime-only $(BUILD)-gpu-bundle $(BUILD)-gpu-cpu \
	  $(BUILD)-gpu-check $(BUILD)-torch2
