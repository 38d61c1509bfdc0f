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
