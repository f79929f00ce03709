// InsideReportView: the Inside panel's reading of an inside-the-model report
// (the engine's JSON, schema glassbox-inside-v1, docs/inside.md), parsed once
// with QJsonDocument, and the small pure functions the panel draws from: one
// attention row (a head, or the mean over its KV group), the order of a layer's
// heads for a sort, the argmax of a row. Plain values, no widgets, so tests can
// check them against the JSON on their own.
// Threads: any (plain data).
#pragma once

#include <QByteArray>
#include <QString>
#include <QVector>
#include <optional>

namespace gbui {

struct InsideToken {
  int id = 0;
  QString text;
  double prob = 0.0;  // where the JSON gives one (a top-k entry)
};

struct InsideLayerView {
  int layer = 0;
  bool sliding = false;
  int window = 0;
  int firstPosition = 0;               // the first position the attention rows cover
  QVector<QVector<double>> attention;  // (num_heads) rows over firstPosition .. position; empty without attention
  QVector<double> headEntropy;         // (num_heads) nats
  QVector<double> headSinkMass;        // (num_heads) weight on position 0
  double residualNorm = 0.0, attentionNorm = 0.0, mlpNorm = 0.0, cosineToPrevious = 0.0;
  bool hasLens = false;
  QVector<InsideToken> lensTop;
  int targetRank = -1;  // 0 = the lens' top choice
  double targetProb = 0.0;
};

struct InsideReportView {
  QString architecture;
  int numLayers = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int position = 0;
  InsideToken token;               // the token at the position
  InsideToken target;              // what the lens ranks
  QString targetSource;            // "next" or "argmax"
  QVector<InsideToken> context;    // tokens 0 .. position
  QVector<InsideToken> finalTop;   // the model's next-token top-k
  int reusedTokens = 0, recomputedTokens = 0;
  QString kType, vType;
  double prefillMs = 0.0, captureMs = 0.0, lensMs = 0.0, totalMs = 0.0;
  QString lensError;
  QVector<InsideLayerView> layers;  // the layers reported, in order
};

// A token's text for display: the text with line breaks shown, or "<id N>"
// for a token without text (a special token such as BOS).
QString insideTokenLabel(const InsideToken& token);

// nullopt with `error` set when the text is not such a report.
std::optional<InsideReportView> parseInsideReport(const QByteArray& json, QString& error);

enum class InsideHeadSort { Natural, Entropy, SinkMass };

// The heads of `layer` in the order a sort shows them: natural (0, 1, ...),
// by entropy (lowest first: the most focused heads), by sink mass (highest first).
QVector<int> insideHeadOrder(const InsideLayerView& layer, InsideHeadSort sort);
// Head `head`'s attention row of `layer` (over firstPosition .. position), or
// with `meanOverGroup` the mean of the rows of the heads sharing its KV head.
QVector<double> insideAttentionRow(const InsideReportView& report, const InsideLayerView& layer, int head,
                                   bool meanOverGroup);
// The index of the largest weight (the first of equal ones); -1 for an empty row.
int insideArgmax(const QVector<double>& row);

}  // namespace gbui
