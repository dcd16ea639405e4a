# cachewatch_system_grpc_proto(<target> <proto file>) makes a static library
# of the messages and gRPC stubs of a .proto shipped outside the tree (Debian's
# /usr/share/grpc-proto): grpc.health.v1 for the daemon's health service,
# grpc.reflection.v1alpha for the tests' reflection client. APPEND_PATH makes
# protoc see the file by its own name, so "health.proto" generates
# "health.pb.h" and "health.grpc.pb.h", in the target's binary directory
# (gen/), which the library puts on its users' include path.
function(cachewatch_system_grpc_proto target proto)
  add_library(${target} STATIC ${proto})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/gen)
  file(MAKE_DIRECTORY ${gen})
  target_include_directories(${target} PUBLIC ${gen})
  protobuf_generate(TARGET ${target} LANGUAGE cpp APPEND_PATH
    PROTOC_OUT_DIR ${gen})
  protobuf_generate(TARGET ${target} LANGUAGE grpc APPEND_PATH
    GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
    PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
    PROTOC_OUT_DIR ${gen})
endfunction()
