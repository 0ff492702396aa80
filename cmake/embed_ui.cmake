# Embeds the web UI's files (ui/) into one C file at build time, so the
# binary alone serves the whole UI. Script mode:
#   cmake -DOUT=<file.c> -DFILES=a,b -DROOT=<dir> -P embed_ui.cmake
set(body "/* Generated from ui/ by cmake/embed_ui.cmake; not committed. */\n#include \"exporters/store/ui.h\"\n\n")
set(table "const struct fc_ui_asset fc_ui_assets[] = {\n")
set(i 0)
string(REPLACE "," ";" FILES "${FILES}")
foreach(f ${FILES})
  file(READ ${ROOT}/${f} hex HEX)
  file(SIZE ${ROOT}/${f} size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const unsigned char asset_${i}[] = {${bytes}0};\n")
  string(APPEND table "    {\"${f}\", asset_${i}, ${size}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND table "    {0, 0, 0},\n};\n")
file(WRITE ${OUT}.tmp "${body}\n${table}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
