# llamacpp-cpu (linux/amd64) as today's recipes write it: a multi-stage Dockerfile that
# unpacks the source, applies the patch and compiles in one RUN, then copies the result onto
# the runtime. The benchmark builds it with the docker CLI and BuildKit beside enginebuild.
# sysroot.tar is the component's builder environment (the same pinned packages), runtime.tar
# the runtime's filesystem, build_llamacpp.sh the family's build script (the same flags).
FROM scratch AS build
ADD sysroot.tar /
COPY llama-cpp-python.tar.gz build_llamacpp.sh edit.patch /opt/
ARG SALT=0
ENV CCACHE_DISABLE=1 LLAMA_SOURCE_DIR=vendor/llama.cpp GGML_NATIVE=OFF MAX_JOBS=4 ENGINEBUILD_OUTPUTS=/opt/out
RUN mkdir -p /opt/src && cd /opt/src && tar xzf /opt/llama-cpp-python.tar.gz && cd llama_cpp_python-* \
    && if [ -s /opt/edit.patch ]; then patch -p1 < /opt/edit.patch; fi \
    && echo "build $SALT" && sh /opt/build_llamacpp.sh

FROM scratch
ADD runtime.tar /
COPY --from=build /opt/out/ /usr/local/
ENV MODEL_PATH=/models PORT=8012 CTX_SIZE=4096 N_GPU_LAYERS=999 SPEC_TYPE=ngram-simple DRAFT_MAX=16 HOME=/root
EXPOSE 8012
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/enginebuild/bin/launch_server.sh"]
