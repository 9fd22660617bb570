// A small XML tree for NCCL's topology files (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE).
//
// The format is plain: elements with attributes, nested, no text content that matters:
//   <system version="1">
//     <cpu numaid="0" affinity="..." arch="x86_64" vendor="GenuineIntel" ...>
//       <pci busid="0000:13:00.0" class="0x030200" link_speed="16 GT/s" link_width="16">
//         <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="..." count="2" tclass="0x068000"/></gpu>
// The parser accepts a declaration, comments, both quote styles and the five predefined
// entities, and reports errors with the line they are on. Attributes keep their order,
// and the writer is deterministic (two-space indent, empty elements self-closed), so
// write(parse(write(x))) == write(x): a dump loaded and dumped again is the same file.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace coll {

class XmlNode {
 public:
  explicit XmlNode(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  // The attribute's value, or nullptr when absent.
  const std::string* attr(std::string_view key) const;
  std::string attrOr(std::string_view key, std::string_view fallback) const;
  void setAttr(std::string_view key, std::string value);  // replaces or appends
  const std::vector<std::pair<std::string, std::string>>& attrs() const { return attrs_; }

  XmlNode* addChild(std::string name);
  XmlNode* adopt(std::unique_ptr<XmlNode> child);
  const std::vector<std::unique_ptr<XmlNode>>& children() const { return children_; }
  XmlNode* parent() const { return parent_; }
  // First child with this name and (if given) attribute value, or nullptr.
  XmlNode* child(std::string_view name, std::string_view key = {}, std::string_view value = {}) const;
  std::unique_ptr<XmlNode> clone() const;

 private:
  std::string name_;
  std::vector<std::pair<std::string, std::string>> attrs_;
  std::vector<std::unique_ptr<XmlNode>> children_;
  XmlNode* parent_ = nullptr;
};

// Limits on a document (a topology file is a few KiB; these stop a wrong or hostile file
// from taking the process's memory or time): its bytes, its elements, and the attributes
// of one element.
constexpr size_t kMaxXmlBytes = 16 << 20;
constexpr int kMaxXmlElements = 1 << 16;
constexpr int kMaxXmlAttrs = 256;

// Parses a document with one root element; `origin` names it in errors.
Result<std::unique_ptr<XmlNode>> xmlParse(std::string_view text, const std::string& origin);
Result<std::unique_ptr<XmlNode>> xmlLoadFile(const std::string& path);
std::string xmlWrite(const XmlNode& root);
Status xmlSaveFile(const std::string& path, const XmlNode& root);

}  // namespace coll
