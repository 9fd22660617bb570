#include "topology/xml.h"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

namespace coll {

const std::string* XmlNode::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs_)
    if (k == key) return &v;
  return nullptr;
}

std::string XmlNode::attrOr(std::string_view key, std::string_view fallback) const {
  const std::string* v = attr(key);
  return v ? *v : std::string(fallback);
}

void XmlNode::setAttr(std::string_view key, std::string value) {
  for (auto& [k, v] : attrs_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  attrs_.emplace_back(std::string(key), std::move(value));
}

XmlNode* XmlNode::addChild(std::string name) { return adopt(std::make_unique<XmlNode>(std::move(name))); }

XmlNode* XmlNode::adopt(std::unique_ptr<XmlNode> child) {
  child->parent_ = this;
  children_.push_back(std::move(child));
  return children_.back().get();
}

XmlNode* XmlNode::child(std::string_view name, std::string_view key, std::string_view value) const {
  for (const auto& c : children_) {
    if (c->name_ != name) continue;
    if (key.empty()) return c.get();
    const std::string* v = c->attr(key);
    if (v && *v == value) return c.get();
  }
  return nullptr;
}

std::unique_ptr<XmlNode> XmlNode::clone() const {
  auto copy = std::make_unique<XmlNode>(name_);
  copy->attrs_ = attrs_;
  for (const auto& c : children_) copy->adopt(c->clone());
  return copy;
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

  Result<std::unique_ptr<XmlNode>> document() {
    std::unique_ptr<XmlNode> root;
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size()) break;
      if (startsWith("<?")) {
        if (!skipPast("?>")) return error("unterminated <?...?> declaration");
      } else if (startsWith("<!--")) {
        if (!skipPast("-->")) return error("unterminated comment");
      } else if (startsWith("<!")) {
        if (!skipPast(">")) return error("unterminated <!...> declaration");
      } else if (s_[pos_] == '<') {
        if (root) return error("a second root element");
        COLL_ASSIGN(root, element(0));
      } else {
        return error("text outside the root element");
      }
    }
    if (!root) return error("no root element");
    return root;
  }

 private:
  Status error(const std::string& what) const {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    return invalidArgument(origin_ + " line " + std::to_string(line) + ": " + what);
  }
  bool startsWith(std::string_view p) const { return s_.substr(pos_, p.size()) == p; }
  bool skipPast(std::string_view p) {
    size_t at = s_.find(p, pos_);
    if (at == std::string_view::npos) return false;
    pos_ = at + p.size();
    return true;
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  static bool nameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ':';
  }
  std::string name() {
    size_t b = pos_;
    while (pos_ < s_.size() && nameChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  Result<std::string> unescape(std::string_view raw) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos) return error("'&' without ';' in an attribute value");
      std::string_view ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "amp") out += '&';
      else if (ent == "lt") out += '<';
      else if (ent == "gt") out += '>';
      else if (ent == "quot") out += '"';
      else if (ent == "apos") out += '\'';
      else return error("unknown entity &" + std::string(ent) + ";");
      i = semi;
    }
    return out;
  }

  // At '<' of a start tag: the element, its attributes and its children.
  Result<std::unique_ptr<XmlNode>> element(int depth) {
    if (depth > 64) return error("elements nested deeper than 64");
    if (++elements_ > kMaxXmlElements) return error("more than " + std::to_string(kMaxXmlElements) + " elements");
    ++pos_;  // '<'
    std::string tag = name();
    if (tag.empty()) return error("expected an element name after '<'");
    auto node = std::make_unique<XmlNode>(tag);
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size()) return error("unterminated <" + tag + ">");
      if (startsWith("/>")) {
        pos_ += 2;
        return node;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string key = name();
      if (key.empty()) return error("expected an attribute name in <" + tag + ">");
      if (node->attrs().size() >= static_cast<size_t>(kMaxXmlAttrs))
        return error("more than " + std::to_string(kMaxXmlAttrs) + " attributes in <" + tag + ">");
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=') return error("expected '=' after " + key + " in <" + tag + ">");
      ++pos_;
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\''))
        return error("expected a quoted value for " + key + " in <" + tag + ">");
      char q = s_[pos_++];
      size_t end = s_.find(q, pos_);
      if (end == std::string_view::npos) return error("unterminated value of " + key + " in <" + tag + ">");
      COLL_ASSIGN(std::string value, unescape(s_.substr(pos_, end - pos_)));
      pos_ = end + 1;
      if (node->attr(key)) return error("attribute " + key + " twice in <" + tag + ">");
      node->setAttr(key, std::move(value));
    }
    // Content: children, comments, ignorable text, then </tag>.
    for (;;) {
      size_t lt = s_.find('<', pos_);
      if (lt == std::string_view::npos) return error("<" + tag + "> is never closed");
      pos_ = lt;
      if (startsWith("<!--")) {
        if (!skipPast("-->")) return error("unterminated comment");
      } else if (startsWith("</")) {
        pos_ += 2;
        std::string closing = name();
        if (closing != tag) return error("</" + closing + "> closes <" + tag + ">");
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return error("expected '>' after </" + tag);
        ++pos_;
        return node;
      } else {
        COLL_ASSIGN(auto child, element(depth + 1));
        node->adopt(std::move(child));
      }
    }
  }

  std::string_view s_;
  const std::string& origin_;
  size_t pos_ = 0;
  int elements_ = 0;
};

void escapeTo(std::string& out, const std::string& v) {
  for (char c : v) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
}

void writeNode(std::string& out, const XmlNode& n, int depth) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += '<';
  out += n.name();
  for (const auto& [k, v] : n.attrs()) {
    out += ' ';
    out += k;
    out += "=\"";
    escapeTo(out, v);
    out += '"';
  }
  if (n.children().empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const auto& c : n.children()) writeNode(out, *c, depth + 1);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + n.name() + ">\n";
}

}  // namespace

Result<std::unique_ptr<XmlNode>> xmlParse(std::string_view text, const std::string& origin) {
  return Parser(text, origin).document();
}

Result<std::unique_ptr<XmlNode>> xmlLoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return systemError("cannot open topology file \"" + path + "\"", errno);
  // Read at most one byte past the limit (the path may name a device or a pipe).
  std::string text(kMaxXmlBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxXmlBytes)
    return invalidArgument("topology file \"" + path + "\" is larger than " + std::to_string(kMaxXmlBytes) + " bytes");
  return xmlParse(text, "topology file \"" + path + "\"");
}

std::string xmlWrite(const XmlNode& root) {
  std::string out;
  writeNode(out, root, 0);
  return out;
}

Status xmlSaveFile(const std::string& path, const XmlNode& root) {
  std::string text = xmlWrite(root);
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return systemError("cannot write topology dump \"" + path + "\"", errno);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return systemError("cannot write topology dump \"" + path + "\"", err);
  }
  return okStatus();
}

}  // namespace coll
