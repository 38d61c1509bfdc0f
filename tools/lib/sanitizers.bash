# The sanitizer builds' compiler flags and run-time options, shared by tools/cuda-emulation and
# tools/sanitize-services so that both instrument the same way. Source it, then call
#   sanitizer_setup address|thread [LOG_PREFIX]
# which sets sanitizer_flags (for CMAKE_CXX_FLAGS and the linker flags) and exports the
# options the instrumented programs read. `address` is AddressSanitizer with
# UndefinedBehaviorSanitizer, every report fatal; `thread` is ThreadSanitizer. With
# LOG_PREFIX every instrumented process, the programs a test starts included, writes its
# reports to LOG_PREFIX.PID instead of stderr, where sanitizer_reports finds them.
# Options already set in the environment are kept.

sanitizer_setup() {
  local kind=$1 log=${2:-}
  local log_option=${log:+:log_path=$log}
  case "$kind" in
    address)
      sanitizer_flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
      export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1$log_option}
      export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1$log_option}
      ;;
    thread)
      sanitizer_flags="-fsanitize=thread"
      local suppressions
      suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tsan-suppressions.txt
      export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$suppressions$log_option}
      # OpenBLAS's own threads are not instrumented: their hand-offs would read as races.
      export OPENBLAS_NUM_THREADS=1
      ;;
    *)
      echo "sanitizer_setup: unknown kind '$kind' (address or thread)" >&2
      return 2
      ;;
  esac
}

# Configures DIR as an instrumented build with sanitizer_flags (call sanitizer_setup first):
#   sanitizer_configure DIR [-DNAME=VALUE ...]
# RelWithDebInfo with line tables only (-g1): a report's stack still names every file and line,
# and without the variables' debug information each file compiles in a fifth less time. -O2 as
# before; -O1, which AddressSanitizer's documentation suggests, would halve the compile time but
# has not passed the whole suite yet (docs/testing.md, "CI's length"). With the test hooks,
# without the CUDA backend (nvcc's code is not instrumented) and without jemalloc (it would take
# malloc from the sanitizer's allocator). Ninja, where installed, builds the many one-file test
# targets side by side (CMake's Makefiles take named targets one at a time); a folder keeps the
# generator it was made with.
sanitizer_configure() {
  local dir=$1 generator=()
  shift
  if [ ! -f "$dir/CMakeCache.txt" ] && [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then
    generator=(-G Ninja)
  fi
  cmake -S . -B "$dir" ${generator[@]+"${generator[@]}"} -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DEX2D_BUILD_CUDA=OFF \
    -DEX2D_TEST_HOOKS=ON -DEX2D_USE_JEMALLOC=OFF "-DCMAKE_CXX_FLAGS=$sanitizer_flags" \
    "-DCMAKE_EXE_LINKER_FLAGS=$sanitizer_flags" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitizer_flags" \
    "$@" >/dev/null
}

# build-asan's options beyond sanitizer_configure's: tools/cuda-emulation sanitize and
# tools/sanitize-services asan both configure it with these, so the second builds only what the
# first did not (another option in either would reconfigure and rebuild the whole tree).
asan_tree_options=(-DEX2D_BUILD_FLEET=ON -DEX2D_CUDA_EMULATION=ON)

# Prints every report written under LOG_PREFIX (sanitizer_setup's) and fails if there is one.
sanitizer_reports() {
  local log=$1 reports
  mapfile -t reports < <(compgen -G "$log.*" || true)
  ((${#reports[@]} == 0)) && return 0
  echo "sanitizer reports from ${#reports[@]} processes:" >&2
  for report in "${reports[@]}"; do
    echo "== $report" >&2
    cat "$report" >&2
  done
  return 1
}
