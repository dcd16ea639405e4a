# Warnings for the project's own code (generated code does not link this).
add_library(cachewatch_warnings INTERFACE)
target_compile_options(cachewatch_warnings INTERFACE -Wall -Wextra -Werror)
