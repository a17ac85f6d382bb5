// `weft plot`: loss and validation loss of a --metrics JSONL file against the
// step, drawn with cairo to a PNG or SVG file.
#include <cairo-svg.h>
#include <cairo.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli.h"
#include "weft/core/error.h"
#include "weft/io/json.h"

namespace weft {
namespace {

struct Point {
  double step, value;
};

struct Curves {
  std::vector<Point> loss, val_loss;
};

// Every line with a "loss" (and those with a "val_loss"), by step; a step
// written twice (a resumed run) keeps its last line.
Curves read_metrics(const std::string& path) {
  std::ifstream in(path);
  WEFT_CHECK(in.good(), "cannot read {}: {}", path,
             std::filesystem::exists(path) ? "permission denied" : "no such file");
  std::map<int64_t, double> loss, val;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const io::Json j = io::parse_json(line, format("{} line {}", path, n));
    WEFT_CHECK(j.is_object(), "{} line {}: expected a JSON object, got {}", path, n,
               io::json_type_name(j.type()));
    const io::Json* step = j.find("step");
    if (!step || !step->is_integer()) continue;
    if (const io::Json* v = j.find("loss"); v && v->is_number())
      loss[step->as_int()] = v->as_double();
    if (const io::Json* v = j.find("val_loss"); v && v->is_number())
      val[step->as_int()] = v->as_double();
  }
  WEFT_CHECK(!loss.empty(),
             "{} has no line with a \"step\" and a \"loss\": pass the file of `weft train "
             "--metrics FILE`",
             path);
  Curves c;
  for (const auto& [s, v] : loss) c.loss.push_back({static_cast<double>(s), v});
  for (const auto& [s, v] : val) c.val_loss.push_back({static_cast<double>(s), v});
  return c;
}

// A number of the form {1, 2, 5} x 10^k near `x`.
double nice_step(double span, int target_ticks) {
  const double raw = span / std::max(1, target_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  int decimals = 0;                  // of the tick labels
  double fraction(double v) const {  // 0 at lo, 1 at hi
    return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo))
               : (v - lo) / (hi - lo);
  }
};

int decimals_for(double step) {
  return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
}

// A linear axis from tick to tick around [lo, hi]; `integer`: steps of at least 1.
Axis linear_axis(double lo, double hi, bool integer) {
  if (hi <= lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double step = nice_step(hi - lo, 6);
  if (integer) step = std::max(step, 1.0);
  Axis a;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0; a.lo + i * step <= a.hi + step * 1e-6; ++i) a.ticks.push_back(a.lo + i * step);
  a.decimals = decimals_for(step);
  return a;
}

// A logarithmic axis over [lo, hi] (positive): ticks at 1, 2, 5 x 10^k, or at
// linear steps when the range holds fewer than three of those.
Axis log_axis(double lo, double hi) {
  Axis a;
  a.log = true;
  const double pad = std::max(std::log(hi / lo), 0.1) * 0.04;
  a.lo = lo * std::exp(-pad);
  a.hi = hi * std::exp(pad);
  for (int k = static_cast<int>(std::floor(std::log10(a.lo))); k <= std::ceil(std::log10(a.hi));
       ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double t = m * std::pow(10.0, k);
      if (t >= a.lo && t <= a.hi) a.ticks.push_back(t);
    }
  }
  if (a.ticks.size() >= 3) {
    a.decimals = decimals_for(a.ticks.front());
    return a;
  }
  const double step = nice_step(a.hi - a.lo, 5);
  a.ticks.clear();
  for (double t = std::ceil(a.lo / step) * step; t <= a.hi; t += step) a.ticks.push_back(t);
  a.decimals = decimals_for(step);
  return a;
}

std::string label(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Rgb {
  double r, g, b;
};
constexpr Rgb kLossColour{0x1f / 255.0, 0x77 / 255.0, 0xb4 / 255.0};  // blue
constexpr Rgb kValColour{0xd6 / 255.0, 0x27 / 255.0, 0x28 / 255.0};   // red

struct Layout {
  double width, height, left, top, right, bottom;  // the plot area inside the margins
  Axis x, y;
  double px(double step) const { return left + x.fraction(step) * (right - left); }
  double py(double v) const { return bottom - y.fraction(v) * (bottom - top); }
};

// Grid lines, ticks, tick labels and the frame.
void draw_axes(cairo_t* cr, const Layout& l) {
  cairo_text_extents_t ext;
  cairo_set_line_width(cr, 1);
  for (double t : l.y.ticks) {
    const double y = std::round(l.py(t)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, l.left, y);
    cairo_line_to(cr, l.right, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, l.left - 5, y);
    cairo_line_to(cr, l.left, y);
    cairo_stroke(cr);
    const std::string s = label(t, l.y.decimals);
    cairo_text_extents(cr, s.c_str(), &ext);
    cairo_move_to(cr, l.left - 8 - ext.x_advance, y + ext.height / 2);
    cairo_show_text(cr, s.c_str());
  }
  for (double t : l.x.ticks) {
    const double x = std::round(l.px(t)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x, l.top);
    cairo_line_to(cr, x, l.bottom);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x, l.bottom);
    cairo_line_to(cr, x, l.bottom + 5);
    cairo_stroke(cr);
    const std::string s = label(t, l.x.decimals);
    cairo_text_extents(cr, s.c_str(), &ext);
    cairo_move_to(cr, x - ext.x_advance / 2, l.bottom + 20);
    cairo_show_text(cr, s.c_str());
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, l.left + 0.5, l.top + 0.5, l.right - l.left, l.bottom - l.top);
  cairo_stroke(cr);
}

void draw_titles(cairo_t* cr, const Layout& l, const std::string& title) {
  cairo_text_extents_t ext;
  cairo_text_extents(cr, "step", &ext);
  cairo_move_to(cr, (l.left + l.right - ext.x_advance) / 2, l.height - 12);
  cairo_show_text(cr, "step");
  const char* ylabel = l.y.log ? "loss (log scale)" : "loss";
  cairo_text_extents(cr, ylabel, &ext);
  cairo_save(cr);
  cairo_move_to(cr, 18, (l.top + l.bottom + ext.x_advance) / 2);
  cairo_rotate(cr, -M_PI / 2);
  cairo_show_text(cr, ylabel);
  cairo_restore(cr);
  cairo_set_font_size(cr, 15);
  cairo_text_extents(cr, title.c_str(), &ext);
  cairo_move_to(cr, (l.width - ext.x_advance) / 2, l.top / 2 + ext.height / 2);
  cairo_show_text(cr, title.c_str());
  cairo_set_font_size(cr, 12);
}

void polyline(cairo_t* cr, const Layout& l, const std::vector<Point>& pts, Rgb colour,
              double width) {
  cairo_set_source_rgb(cr, colour.r, colour.g, colour.b);
  cairo_set_line_width(cr, width);
  for (size_t i = 0; i < pts.size(); ++i) {
    (i ? cairo_line_to : cairo_move_to)(cr, l.px(pts[i].step), l.py(pts[i].value));
  }
  if (pts.size() == 1) cairo_rel_line_to(cr, 0, 0);
  cairo_stroke(cr);
}

// Clipped to the plot area: loss as a line, val loss as a line with a dot at
// every evaluation.
void draw_curves(cairo_t* cr, const Layout& l, const Curves& c) {
  cairo_save(cr);
  cairo_rectangle(cr, l.left, l.top, l.right - l.left, l.bottom - l.top);
  cairo_clip(cr);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  polyline(cr, l, c.loss, kLossColour, 2);
  if (!c.val_loss.empty()) {
    polyline(cr, l, c.val_loss, kValColour, 2);
    for (const Point& p : c.val_loss) {
      cairo_arc(cr, l.px(p.step), l.py(p.value), 3.5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
  }
  cairo_restore(cr);
}

// Top right inside the plot area.
void draw_legend(cairo_t* cr, const Layout& l, const Curves& c) {
  std::vector<std::pair<std::string, Rgb>> entries{{"loss", kLossColour}};
  if (!c.val_loss.empty()) entries.emplace_back("val loss", kValColour);
  const double box_w = 100, box_h = 8 + 18 * static_cast<double>(entries.size());
  const double bx = l.right - box_w - 10, by = l.top + 10;
  cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
  cairo_rectangle(cr, bx, by, box_w, box_h);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (size_t i = 0; i < entries.size(); ++i) {
    const double y = by + 13 + 18 * static_cast<double>(i);
    const Rgb col = entries[i].second;
    cairo_set_source_rgb(cr, col.r, col.g, col.b);
    cairo_set_line_width(cr, 2);
    cairo_move_to(cr, bx + 8, y);
    cairo_line_to(cr, bx + 32, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, bx + 40, y + 4);
    cairo_show_text(cr, entries[i].first.c_str());
  }
}

// The parts share cairo state, so their order matters: the titles are drawn in
// the frame's black, the legend's labels in the font size the titles restore.
void draw(cairo_t* cr, const Layout& l, const Curves& c, const std::string& title) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);
  draw_axes(cr, l);
  draw_titles(cr, l, title);
  draw_curves(cr, l, c);
  draw_legend(cr, l, c);
}

cli::Options plot_options() {
  cli::Options opts("weft plot METRICS.jsonl -o FILE.png|FILE.svg [options]",
                    "Draws the loss and the validation loss of a `weft train --metrics` file\n"
                    "against the step (axes, ticks, legend) as a PNG or SVG picture. A step\n"
                    "written twice (a resumed run) is drawn once, with its last value. Nothing is\n"
                    "written when the input is bad.");
  opts.positional("METRICS.jsonl", "the JSONL file of weft train --metrics")
      .option("output", "FILE", "none",
              "-o, --output: the picture, FILE.png or FILE.svg (required)")
      .option("title", "TEXT", "loss of METRICS.jsonl", "the title above the plot")
      .option("width", "PX", "800", "width in pixels (SVG: points)")
      .option("height", "PX", "500", "height in pixels (SVG: points)")
      .flag("log-y", "logarithmic loss axis")
      .flag("json", "print the axes as JSON (ranges, ticks, plot area) after drawing");
  return opts;
}

struct PlotRequest {
  std::string input, output, ext;
  int64_t width, height;
};

PlotRequest plot_request(const cli::Options& opts) {
  WEFT_CHECK(opts.positionals().size() == 1,
             "give the metrics file: weft plot METRICS.jsonl -o loss.png");
  WEFT_CHECK(opts.given("output"), "give the picture to write: -o loss.png or -o loss.svg");
  PlotRequest r;
  r.input = opts.positionals()[0];
  r.output = opts.str("output");
  r.ext = std::filesystem::path(r.output).extension().string();
  WEFT_CHECK(r.ext == ".png" || r.ext == ".svg",
             "-o {}: the picture must end in .png or .svg (got '{}')", r.output, r.ext);
  r.width = opts.integer("width");
  r.height = opts.integer("height");
  WEFT_CHECK(r.width >= 200 && r.width <= 10000 && r.height >= 150 && r.height <= 10000,
             "--width {} --height {}: choose 200..10000 x 150..10000 pixels", r.width, r.height);
  return r;
}

// The steps and values the curves span.
struct Extent {
  double step_lo, step_hi, lo, hi;
};

Extent extent_of(const Curves& curves, const std::string& input) {
  Extent e{curves.loss.front().step, curves.loss.back().step, curves.loss.front().value,
           curves.loss.front().value};
  for (const auto* set : {&curves.loss, &curves.val_loss}) {
    for (const Point& p : *set) {
      e.step_lo = std::min(e.step_lo, p.step);
      e.step_hi = std::max(e.step_hi, p.step);
      e.lo = std::min(e.lo, p.value);
      e.hi = std::max(e.hi, p.value);
      WEFT_CHECK(std::isfinite(p.value), "{}: the loss at step {} is not finite", input, p.step);
    }
  }
  return e;
}

// Drawn to a temporary name in the same directory, renamed when complete.
void write_picture(const PlotRequest& r, const Layout& l, const Curves& curves,
                   const std::string& title) {
  const std::string tmp = format("{}.tmp{}", r.output, getpid());
  cairo_surface_t* surface =
      r.ext == ".png" ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(r.width),
                                                   static_cast<int>(r.height))
                      : cairo_svg_surface_create(tmp.c_str(), l.width, l.height);
  cairo_t* cr = cairo_create(surface);
  draw(cr, l, curves, title);
  cairo_status_t status = cairo_status(cr);
  cairo_destroy(cr);
  if (status == CAIRO_STATUS_SUCCESS && r.ext == ".png") {
    status = cairo_surface_write_to_png(surface, tmp.c_str());
  }
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS) status = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  std::error_code ec;
  if (status == CAIRO_STATUS_SUCCESS) std::filesystem::rename(tmp, r.output, ec);
  if (status != CAIRO_STATUS_SUCCESS || ec) {
    std::filesystem::remove(tmp, ec);
    WEFT_FAIL("cannot write {}: {}", r.output,
              status != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(status) : ec.message());
  }
}

io::Json axis_json(const Axis& a) {
  io::Json j = io::Json::object();
  j["min"] = a.lo;
  j["max"] = a.hi;
  j["log"] = a.log;
  io::Json ticks = io::Json::array();
  for (double t : a.ticks) ticks.push_back(t);
  j["ticks"] = std::move(ticks);
  io::Json labels = io::Json::array();
  for (double t : a.ticks) labels.push_back(label(t, a.decimals));
  j["labels"] = std::move(labels);
  return j;
}

io::Json plot_json(const PlotRequest& r, const Layout& l, const Curves& curves) {
  io::Json out = io::Json::object();
  out["output"] = r.output;
  out["width"] = r.width;
  out["height"] = r.height;
  out["plot"] = io::Json::object();
  out["plot"]["left"] = l.left;
  out["plot"]["top"] = l.top;
  out["plot"]["right"] = l.right;
  out["plot"]["bottom"] = l.bottom;
  out["x"] = axis_json(l.x);
  out["y"] = axis_json(l.y);
  out["loss_points"] = curves.loss.size();
  out["val_loss_points"] = curves.val_loss.size();
  return out;
}

int plot_command(const std::vector<std::string>& raw) {
  cli::Options opts = plot_options();
  std::vector<std::string> args;
  for (const std::string& a : raw) args.push_back(a == "-o" ? "--output" : a);
  opts.parse(args);
  const PlotRequest r = plot_request(opts);

  const Curves curves = read_metrics(r.input);
  const Extent e = extent_of(curves, r.input);
  const bool log_y = opts.flag_set("log-y");
  WEFT_CHECK(!log_y || e.lo > 0, "--log-y needs positive losses; {} has {}", r.input, e.lo);

  const Layout l{static_cast<double>(r.width),
                 static_cast<double>(r.height),
                 72,
                 44,
                 static_cast<double>(r.width) - 24,
                 static_cast<double>(r.height) - 48,
                 linear_axis(e.step_lo, e.step_hi, true),
                 log_y ? log_axis(e.lo, e.hi) : linear_axis(e.lo, e.hi, false)};
  const std::string title = opts.given("title")
                                ? opts.str("title")
                                : "loss of " + std::filesystem::path(r.input).filename().string();
  write_picture(r, l, curves, title);

  if (opts.flag_set("json")) {
    std::cout << plot_json(r, l, curves).dump() << "\n";
  } else {
    std::cout << format("wrote {} ({} loss points, {} val loss points, steps {}..{})", r.output,
                        curves.loss.size(), curves.val_loss.size(), e.step_lo, e.step_hi)
              << "\n";
  }
  return 0;
}

const cli::Register reg("plot", "draw loss and val loss of a --metrics file (PNG or SVG)",
                        plot_options, plot_command);

}  // namespace
}  // namespace weft
