#include "inside_report.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>
#include <numeric>

namespace gbui {
namespace {

InsideToken insideTokenOf(const QJsonObject& o) {
  return {o.value(QLatin1String("id")).toInt(), o.value(QLatin1String("text")).toString(),
          o.value(QLatin1String("prob")).toDouble()};
}

QVector<InsideToken> insideTokensOf(const QJsonArray& a) {
  QVector<InsideToken> out;
  out.reserve(a.size());
  for (const QJsonValue& v : a) out.push_back(insideTokenOf(v.toObject()));
  return out;
}

QVector<double> insideNumbersOf(const QJsonArray& a) {
  QVector<double> out;
  out.reserve(a.size());
  for (const QJsonValue& v : a) out.push_back(v.toDouble());
  return out;
}

InsideLayerView insideLayerOf(const QJsonObject& o) {
  InsideLayerView l;
  l.layer = o.value(QLatin1String("layer")).toInt();
  l.sliding = o.value(QLatin1String("sliding")).toBool();
  l.window = o.value(QLatin1String("window")).toInt();
  l.firstPosition = o.value(QLatin1String("first_position")).toInt();
  for (const QJsonValue& row : o.value(QLatin1String("attention")).toArray())
    l.attention.push_back(insideNumbersOf(row.toArray()));
  l.headEntropy = insideNumbersOf(o.value(QLatin1String("head_entropy")).toArray());
  l.headSinkMass = insideNumbersOf(o.value(QLatin1String("head_sink_mass")).toArray());
  const QJsonObject s = o.value(QLatin1String("signals")).toObject();
  l.residualNorm = s.value(QLatin1String("residual_norm")).toDouble();
  l.attentionNorm = s.value(QLatin1String("attention_norm")).toDouble();
  l.mlpNorm = s.value(QLatin1String("mlp_norm")).toDouble();
  l.cosineToPrevious = s.value(QLatin1String("cosine_to_previous")).toDouble();
  if (o.contains(QLatin1String("lens"))) {
    const QJsonObject lens = o.value(QLatin1String("lens")).toObject();
    l.hasLens = true;
    l.lensTop = insideTokensOf(lens.value(QLatin1String("top")).toArray());
    l.targetRank = lens.value(QLatin1String("target_rank")).toInt(-1);
    l.targetProb = lens.value(QLatin1String("target_prob")).toDouble();
  }
  return l;
}

}  // namespace

std::optional<InsideReportView> parseInsideReport(const QByteArray& json, QString& error) {
  QJsonParseError parseError;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &parseError);
  if (!doc.isObject()) {
    error = QStringLiteral("not a JSON object: %1").arg(parseError.errorString());
    return std::nullopt;
  }
  const QJsonObject o = doc.object();
  if (o.value(QLatin1String("schema")).toString() != QLatin1String("glassbox-inside-v1")) {
    error = QStringLiteral("not an inside-the-model report (schema %1)").arg(o.value(QLatin1String("schema")).toString());
    return std::nullopt;
  }
  InsideReportView r;
  r.architecture = o.value(QLatin1String("architecture")).toString();
  r.numLayers = o.value(QLatin1String("num_layers")).toInt();
  r.numHeads = o.value(QLatin1String("num_heads")).toInt();
  r.numKvHeads = o.value(QLatin1String("num_kv_heads")).toInt();
  r.headDim = o.value(QLatin1String("head_dim")).toInt();
  r.position = o.value(QLatin1String("position")).toInt();
  r.token = insideTokenOf(o.value(QLatin1String("token")).toObject());
  const QJsonObject target = o.value(QLatin1String("target")).toObject();
  r.target = insideTokenOf(target);
  r.targetSource = target.value(QLatin1String("source")).toString();
  r.context = insideTokensOf(o.value(QLatin1String("context")).toArray());
  r.finalTop = insideTokensOf(o.value(QLatin1String("final")).toObject().value(QLatin1String("top")).toArray());
  const QJsonObject kv = o.value(QLatin1String("kv")).toObject();
  r.reusedTokens = kv.value(QLatin1String("reused_tokens")).toInt();
  r.recomputedTokens = kv.value(QLatin1String("recomputed_tokens")).toInt();
  r.kType = kv.value(QLatin1String("k_type")).toString();
  r.vType = kv.value(QLatin1String("v_type")).toString();
  const QJsonObject t = o.value(QLatin1String("timing_ms")).toObject();
  r.prefillMs = t.value(QLatin1String("prefill")).toDouble();
  r.captureMs = t.value(QLatin1String("capture")).toDouble();
  r.lensMs = t.value(QLatin1String("lens")).toDouble();
  r.totalMs = t.value(QLatin1String("total")).toDouble();
  r.lensError = o.value(QLatin1String("lens_error")).toString();
  for (const QJsonValue& v : o.value(QLatin1String("layers")).toArray()) r.layers.push_back(insideLayerOf(v.toObject()));
  return r;
}

QString insideTokenLabel(const InsideToken& token) {
  if (token.text.isEmpty()) return QStringLiteral("<id %1>").arg(token.id);
  QString s = token.text;
  s.replace(QLatin1Char('\n'), QStringLiteral("\u21b5"));
  return s;
}

QVector<int> insideHeadOrder(const InsideLayerView& layer, InsideHeadSort sort) {
  const auto n = static_cast<int>(std::max(layer.attention.size(), layer.headEntropy.size()));
  QVector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto at = [](const QVector<double>& v, int i) { return i < v.size() ? v[i] : 0.0; };
  if (sort == InsideHeadSort::Entropy)
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return at(layer.headEntropy, a) < at(layer.headEntropy, b); });
  else if (sort == InsideHeadSort::SinkMass)
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return at(layer.headSinkMass, a) > at(layer.headSinkMass, b); });
  return order;
}

QVector<double> insideAttentionRow(const InsideReportView& report, const InsideLayerView& layer, int head,
                                   bool meanOverGroup) {
  const auto numHeads = static_cast<int>(layer.attention.size());
  if (head < 0 || head >= numHeads) return {};
  if (!meanOverGroup || report.numKvHeads <= 0 || report.numHeads % report.numKvHeads != 0)
    return layer.attention[head];
  const int group = report.numHeads / report.numKvHeads;  // query heads per KV head
  const int first = head / group * group;
  QVector<double> mean(layer.attention[head].size(), 0.0);
  int count = 0;
  for (int h = first; h < first + group && h < numHeads; ++h, ++count)
    for (int i = 0; i < mean.size() && i < layer.attention[h].size(); ++i) mean[i] += layer.attention[h][i];
  for (double& w : mean) w /= std::max(count, 1);
  return mean;
}

int insideArgmax(const QVector<double>& row) {
  if (row.isEmpty()) return -1;
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace gbui
