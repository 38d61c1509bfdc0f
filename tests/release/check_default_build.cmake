# A build configured with every option at its default has no test hooks: EX2D_TEST_HOOKS is
# OFF in its cache, no file is compiled with the definition EX2D_TEST_HOOKS, and none of the
# hooks' own sources (the EX2D_TEST_* reader fault_injection.cpp, the stand-in backend, the
# backends' patch seam) is compiled at all, while the programs are. With test_release_hooks
# (the hooks' headers compiled that way ignore every EX2D_TEST_* variable), the proof that a
# default build ignores them. Configures only, compiles nothing: a few seconds.
#   cmake -DSOURCE_DIR=DIR -DBINARY_DIR=DIR -DGENERATOR=NAME [-DPREFIX_PATH=PATHS]
#         [-DEXPECT_FLEET=ON] -P check_default_build.cmake
file(REMOVE_RECURSE "${BINARY_DIR}")
set(prefix_path)
if(PREFIX_PATH)
    set(prefix_path "-DCMAKE_PREFIX_PATH=${PREFIX_PATH}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}"
                        ${prefix_path}
                RESULT_VARIABLE configured OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT configured EQUAL 0)
    message(FATAL_ERROR "the default configure failed:\n${log}")
endif()

file(STRINGS "${BINARY_DIR}/CMakeCache.txt" hooks REGEX "^EX2D_TEST_HOOKS:")
if(NOT hooks STREQUAL "EX2D_TEST_HOOKS:BOOL=OFF")
    message(FATAL_ERROR "a default build has test hooks: ${hooks}")
endif()
file(READ "${BINARY_DIR}/compile_commands.json" commands)
set(programs services/ex2d/main.cpp common/src/cpu/patch_solver.cpp)
if(EXPECT_FLEET)
    list(APPEND programs services/worker/worker.cpp services/reader/load_frame.cpp
         services/writer/write_output.cpp)
endif()
foreach(source ${programs})
    string(FIND "${commands}" "${source}" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "the default build does not compile ${source}: nothing was checked")
    endif()
endforeach()
foreach(hook EX2D_TEST_HOOKS src/fault_injection.cpp src/standin/standin_backend.cpp
        src/test_hooks/indefinite_patch.cpp)
    string(FIND "${commands}" "${hook}" at)
    if(NOT at EQUAL -1)
        message(FATAL_ERROR "a default build compiles ${hook} (${BINARY_DIR}/compile_commands.json)")
    endif()
endforeach()
message(STATUS "default build: no test hooks; ${programs} compiled without them")
