// gshare-top's command line (--version, --columns), the width of plain
// frames, and what the COMMAND column makes of a command line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "base/version.h"
#include "tools/top_cli.h"
#include "tools/top_columns.h"
#include "tools/top_command.h"
#include "tools/top_format.h"
#include "tools/top_text.h"

using gshare::top::CommandLine;

namespace {

// argv as getopt wants it: writable, null-terminated.
bool parse(std::vector<std::string> words, CommandLine* out, std::string* error) {
  words.insert(words.begin(), "gshare-top");
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  return gshare::top::parse_command_line(int(words.size()), argv.data(), out, error);
}

}  // namespace

TEST_CASE("gshare-top --version names the program and the build's version on one line") {
  CommandLine command_line;
  std::string error;
  REQUIRE(parse({"--version"}, &command_line, &error));
  CHECK(command_line.version);
  CHECK_FALSE(command_line.help);
  CHECK(gshare::top::version_text() == std::string("gshare-top ") + gshare::kVersion + "\n");
  CHECK(std::string(gshare::kVersion).find('.') != std::string::npos);

  REQUIRE(parse({"--once"}, &command_line, &error));
  CHECK_FALSE(command_line.version);

  CHECK_FALSE(parse({"--version=2"}, &command_line, &error));
  CHECK(error == "--version takes no value; see gshare-top --help");
  CHECK_FALSE(parse({"--version", "x"}, &command_line, &error));
  CHECK(error == "unexpected argument x; see gshare-top --help");
}

TEST_CASE("gshare-top --columns lists every process column once, with its meaning") {
  CommandLine command_line;
  std::string error;
  REQUIRE(parse({"--columns"}, &command_line, &error));
  CHECK(command_line.columns);

  std::string text = gshare::top::columns_text();
  std::vector<std::string> headers;
  for (const gshare::top::Column& column : gshare::top::process_columns()) {
    std::string line = gshare::top::pad_right(column.header, gshare::top::kColumnsHeaderWidth) +
                       " " + column.description + "\n";
    INFO(column.header);
    CHECK(text.find(line) != std::string::npos);
    headers.push_back(column.header);
  }
  CHECK(size_t(std::count(text.begin(), text.end(), '\n')) == headers.size());
  for (const char* header : {"PID", "COMMAND", "P", "E", "LANE", "ADMIT", "SHORT", "SWITCH"})
    CHECK(std::count(headers.begin(), headers.end(), header) == 1);
  CHECK(gshare::top::usage_text().find("--columns") != std::string::npos);
  CHECK(gshare::top::usage_text().find("--version") != std::string::npos);
}

TEST_CASE("plain frames take $COLUMNS when it is a plain width, else 120") {
  using gshare::top::plain_output_width;
  CHECK(plain_output_width(nullptr) == 120);
  CHECK(plain_output_width("") == 120);
  CHECK(plain_output_width("200") == 200);
  CHECK(plain_output_width("40") == 40);
  CHECK(plain_output_width("39") == 120);
  CHECK(plain_output_width("0") == 120);
  CHECK(plain_output_width("-80") == 120);
  CHECK(plain_output_width("80x") == 120);
  CHECK(plain_output_width(" 80") == 120);
  CHECK(plain_output_width("99999999999999999999999") == 120);
}

TEST_CASE("COMMAND shows the program's name, an interpreter's script by name, and the arguments") {
  using gshare::top::command_summary;
  CHECK(command_summary("/opt/bin/trainer --lr 3") == "trainer --lr 3");
  CHECK(command_summary("trainer") == "trainer");
  CHECK(command_summary("/usr/bin/python3 /home/me/train.py --data /d/x") ==
        "python3 train.py --data /d/x");
  CHECK(command_summary("/usr/bin/python3.11 -u /home/me/train.py") == "python3.11 -u train.py");
  CHECK(command_summary("python -W error /a/b.py") == "python -W error b.py");
  CHECK(command_summary("/usr/bin/python3 -m torch.distributed.run /a/b.py") ==
        "python3 -m torch.distributed.run /a/b.py");
  CHECK(command_summary("/bin/bash /srv/run.sh a") == "bash run.sh a");
  CHECK(command_summary("/usr/bin/env python3 x.py") == "env python3 x.py");
  CHECK(command_summary("/usr/bin/pythonista /a/b") == "pythonista /a/b");
  CHECK(command_summary("/") == "/");
  CHECK(command_summary("dir/") == "dir/");
  CHECK(command_summary("?") == "?");
  CHECK(command_summary("") == "");
  CHECK(gshare::top::is_interpreter("python3.12"));
  CHECK_FALSE(gshare::top::is_interpreter("python-config"));
}

TEST_CASE("no row of the process table runs past the width it is given") {
  gshare::top::Frame frame;
  frame.dir = "/dev/shm";
  gshare::top::GpuView gpu;
  gpu.gpu.uuid = "GPU-e9ce5372-27b0-f740-35a7-5b578f29e37e";
  gpu.gpu.capacity_bytes = 8ull << 30;
  gpu.gpu.policy = "fair";
  gshare::top::ProcessView row;
  row.process.pid = 4194303;
  row.process.command =
      "/usr/bin/python3 /home/someone/projects/a-long-project-name/train.py --epochs 90 --lr 3";
  row.process.admission = "admitted";
  row.process.lane = -1;
  row.gpu_capacity_bytes = gpu.gpu.capacity_bytes;
  row.gpu_policy = "fair";
  gpu.processes.push_back(row);
  frame.gpus.push_back(gpu);

  for (size_t width : {20, 47, 60, 80, 120, 200}) {
    INFO(width);
    bool saw_row = false;
    for (const gshare::top::TextLine& line : gshare::top::render_text(frame, width)) {
      if (line.kind != gshare::top::TextLine::Kind::kProcess &&
          line.kind != gshare::top::TextLine::Kind::kColumnHeader)
        continue;
      INFO(line.text);
      CHECK(gshare::top::display_width(line.text) <= width);
      saw_row = saw_row || line.kind == gshare::top::TextLine::Kind::kProcess;
    }
    CHECK(saw_row);
  }
  std::string wide = gshare::top::join_lines(gshare::top::render_text(frame, 0));
  INFO(wide);
  CHECK(wide.find("4194303 python3 train.py --epochs 90") != std::string::npos);
  CHECK(wide.find("/home/someone") == std::string::npos);
}
