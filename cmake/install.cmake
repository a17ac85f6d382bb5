# `cmake --install`: the weft library, its headers under include/weft, the
# weft command, and a package configuration so that another project can
#   find_package(weft REQUIRED)
#   target_link_libraries(app PRIVATE weft::weft)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The static library's private dependencies travel with it: in the installed
# tree oneDNN is the imported target weftConfig.cmake creates.
target_link_libraries(weft PRIVATE $<INSTALL_INTERFACE:weft::dnnl> $<INSTALL_INTERFACE:weft::pcre2>)

install(TARGETS weft EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS weft_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Public headers only: the kernels' implementations (kernels/impl/,
# kernels/cpu/), their device dispatch and element-access helpers, and the
# comm backends' internals (comm/detail/: the queued operation, the worker, the
# reduction kernels) are internal. No public header includes them (tests/install checks).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h"
        PATTERN "kernels/cpu" EXCLUDE
        PATTERN "kernels/impl" EXCLUDE
        PATTERN "comm/detail" EXCLUDE
        PATTERN "elementwise.h" EXCLUDE
        PATTERN "dispatch.h" EXCLUDE)

set(WEFT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${WEFT_CMAKE_DIR})
if(MPI_CXX_FOUND)
  set(WEFT_PACKAGE_MPI ON)
else()
  set(WEFT_PACKAGE_MPI OFF)
endif()
# A CUDA build links the CUDA runtime and cuBLASLt (and NCCL, by path).
set(WEFT_PACKAGE_CUDA ${WEFT_HAVE_CUDA})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/weftConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/weftConfig.cmake
                              INSTALL_DESTINATION ${WEFT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/weftConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/weftConfig.cmake ${CMAKE_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${WEFT_CMAKE_DIR})
