// An ARIA tree (WAI-ARIA APG "tree view") of DAP variables, children fetched when a node
// is first expanded. Keys: Up/Down move, Right expands, Left collapses, Enter toggles.

import { el } from "./format.js";

export class Tree {
  constructor(root, fetchChildren) {
    this.root = root;
    this.fetchChildren = fetchChildren;
    root.setAttribute("role", "tree");
    root.addEventListener("keydown", (event) => this.key(event));
  }

  clear() {
    this.root.replaceChildren();
  }

  // Add a top-level item {name, value, type, ref, expand}; resolves with its <li>.
  async add(item) {
    const node = this.node(item, 1);
    this.root.append(node);
    this.roving();
    if (item.expand && item.ref) await this.toggle(node, true);
    return node;
  }

  node(item, level) {
    const label = el("span", { class: "label" },
      item.name ? el("span", { class: "name" }, item.name) : null,
      item.name && item.value !== "" ? el("span", { class: "sep" }, " = ") : null,
      el("span", { class: item.error ? "value error" : "value" }, item.value),
      item.type ? el("span", { class: "type" }, ` ${item.type}`) : null);
    const node = el("li", { role: "treeitem", "aria-level": level, tabindex: -1,
      "aria-expanded": item.ref ? "false" : null, "data-ref": item.ref || null }, label);
    node.addEventListener("click", (event) => {
      if (event.target.closest("li") !== node || event.target.closest("button")) return;
      event.stopPropagation();
      this.focus(node);
      if (item.ref) this.toggle(node);
    });
    return node;
  }

  async toggle(node, open) {
    const expanded = node.getAttribute("aria-expanded") === "true";
    const wanted = open ?? !expanded;
    if (wanted === expanded || !node.dataset.ref) return;
    node.setAttribute("aria-expanded", String(wanted));
    let group = node.querySelector(":scope > ul");
    if (!wanted) {
      if (group) group.hidden = true;
      return;
    }
    if (!group) {
      group = el("ul", { role: "group" });
      node.append(group);
      const level = Number(node.getAttribute("aria-level")) + 1;
      try {
        const children = await this.fetchChildren(Number(node.dataset.ref));
        group.replaceChildren(...children.map((child) => this.node(child, level)));
      } catch (error) {
        group.replaceChildren(el("li", { role: "treeitem", class: "error",
          "aria-level": level }, error.message));
      }
    }
    group.hidden = false;
  }

  visible() {
    return [...this.root.querySelectorAll("li[role=treeitem]")]
      .filter((node) => !node.closest("ul[hidden]"));
  }

  roving() {
    const items = this.visible();
    if (items.length && !items.some((node) => node.tabIndex === 0)) items[0].tabIndex = 0;
  }

  focus(node) {
    for (const other of this.root.querySelectorAll("li[tabindex='0']")) other.tabIndex = -1;
    node.tabIndex = 0;
    node.focus();
  }

  key(event) {
    const node = event.target.closest("li[role=treeitem]");
    if (!node) return;
    const items = this.visible();
    const at = items.indexOf(node);
    const moves = {
      ArrowDown: () => items[at + 1] && this.focus(items[at + 1]),
      ArrowUp: () => items[at - 1] && this.focus(items[at - 1]),
      ArrowRight: () => this.toggle(node, true),
      ArrowLeft: () => {
        if (node.getAttribute("aria-expanded") === "true") this.toggle(node, false);
        else {
          const parent = node.parentElement.closest("li[role=treeitem]");
          if (parent) this.focus(parent);
        }
      },
      Enter: () => this.toggle(node),
      " ": () => this.toggle(node),
    };
    if (moves[event.key]) {
      event.preventDefault();
      moves[event.key]();
    }
  }
}
