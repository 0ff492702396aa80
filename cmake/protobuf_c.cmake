# Generates protobuf-c code from proto/ into the build tree (never committed)
# and builds it as one library. Only formats/ includes the generated headers.
find_program(PROTOC_C protoc-c REQUIRED)
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)

set(FC_PROTO_DIR ${CMAKE_SOURCE_DIR}/proto)
set(FC_PROTO_OUT ${CMAKE_BINARY_DIR}/proto)
set(FC_PROTO_FILES
  opentelemetry/proto/common/v1/common.proto
  opentelemetry/proto/resource/v1/resource.proto
  opentelemetry/proto/profiles/v1development/profiles.proto
  opentelemetry/proto/collector/profiles/v1development/profiles_service.proto
  google/rpc/status.proto
  google/v1/profile.proto
  types/v1/types.proto
  querier/v1/querier.proto
)
set(FC_PROTO_SOURCES "")
foreach(p ${FC_PROTO_FILES})
  string(REGEX REPLACE "\\.proto$" ".pb-c.c" c ${p})
  string(REGEX REPLACE "\\.proto$" ".pb-c.h" h ${p})
  list(APPEND FC_PROTO_SOURCES ${FC_PROTO_OUT}/${c})
  add_custom_command(
    OUTPUT ${FC_PROTO_OUT}/${c} ${FC_PROTO_OUT}/${h}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${FC_PROTO_OUT}
    COMMAND ${PROTOC_C} --proto_path=${FC_PROTO_DIR} --c_out=${FC_PROTO_OUT} ${FC_PROTO_DIR}/${p}
    DEPENDS ${FC_PROTO_DIR}/${p}
    COMMENT "protoc-c ${p}")
endforeach()

add_library(flamecol_proto STATIC ${FC_PROTO_SOURCES})
target_include_directories(flamecol_proto PUBLIC ${FC_PROTO_OUT})
target_link_libraries(flamecol_proto PUBLIC PkgConfig::PROTOBUF_C)
# Generated code: no -Werror, no warning set of ours.
target_compile_options(flamecol_proto PRIVATE -w)
