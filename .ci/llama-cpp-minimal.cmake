# Included into llama.cpp's own CMake project when setup.sh builds llama-cpp-python (CMAKE_PROJECT_llama.cpp_INCLUDE).
# llama-cpp-python forces llama.cpp's `common` library on, but its Python bindings load only libllama and the ggml
# libraries: building `common` (and, with LLAVA_BUILD=OFF, the multimodal `mtmd` library, which Switchyard never
# loads) only costs set-up time.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp common library: not used by the Python bindings" FORCE)
